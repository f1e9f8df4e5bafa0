package jsonstore

import (
	"context"
	"slices"

	"github.com/agentspace/agentspace/workspace/driver"
)

// The store keeps the event log's hash chain (driver.ReadTx's
// ChainEvents and ChainBase, driver.Tx's SetChainBase): each line of events.ndjson carries its event's
// hash, and floor.json the hash the event at the floor chains from.
var (
	_ driver.ReadTx = (*tx)(nil)
	_ driver.Tx     = (*tx)(nil)
)

// ChainEvents implements driver.ReadTx.
func (t *tx) ChainEvents(ctx context.Context, after int64, limit int) ([]driver.ChainedEvent, error) {
	var out []driver.ChainedEvent
	for i := t.st.eventsAfter(after); i < len(t.st.events); i++ {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, driver.ChainedEvent{Event: t.st.events[i], Hash: slices.Clone(t.st.hashes[i])})
	}
	return out, nil
}

// ChainBase implements driver.ReadTx.
func (t *tx) ChainBase(ctx context.Context) ([]byte, error) {
	if t.st.floorHash == nil {
		return slices.Clone(driver.ZeroChainHash), nil
	}
	return slices.Clone(t.st.floorHash), nil
}

// SetChainBase implements driver.Tx.
func (t *tx) SetChainBase(ctx context.Context, hash []byte) error {
	setField(t, &t.st.floorHash, slices.Clone(hash))
	setField(t, &t.base, true)
	return nil
}
