package driver_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

func chainEvent(seq int64) workspace.Event {
	return workspace.Event{Seq: seq, Time: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Actor: "planner", Type: workspace.EventNotePut,
		Subject: workspace.Subject{Kind: "note", ID: "decision/auth", Name: "auth"}, Version: 2, Message: "why ✓"}
}

// TestChainHashIsTheDocumentedEncoding pins the encoding to hashes
// computed outside Go (Python's hashlib, from the description in chain.go).
func TestChainHashIsTheDocumentedEncoding(t *testing.T) {
	h1 := driver.ChainHash(driver.ZeroChainHash, chainEvent(1))
	assert.Equal(t, "4d61a5acfe82e8295609a81eabd8f7b32a49604a8dd80831f2ca5750848c2b70", hex.EncodeToString(h1))
	h2 := driver.ChainHash(h1, chainEvent(2))
	assert.Equal(t, "0ad58f065432f0f4dc32ef3458f24ff572759bb75ed832b209ac697c714bd533", hex.EncodeToString(h2))
	assert.Equal(t, [][]byte{h1, h2}, driver.ChainHashes(driver.ZeroChainHash, []workspace.Event{chainEvent(1), chainEvent(2)}))
	e := chainEvent(2)
	e.Message = "why"
	assert.NotEqual(t, h2, driver.ChainHash(h1, e), "the message is covered")
}

// BenchmarkChainHash is the chain's cost per event in a store's append.
func BenchmarkChainHash(b *testing.B) {
	e := chainEvent(1)
	prev := driver.ZeroChainHash
	for b.Loop() {
		prev = driver.ChainHash(prev, e)
	}
}
