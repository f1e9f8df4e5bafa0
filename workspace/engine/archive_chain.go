package engine

import (
	"bytes"
	"context"
	"encoding/hex"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// importChain checks an archive's hash chain as its events are read, and
// hands the chain's base to the store before its first event.
type importChain struct {
	base    []byte // the hash the floor's event chains from
	prev    []byte // the last event's hash read
	chained bool   // an event with a hash was read
}

// start reads the log record's floor hash ("" in archives from before the
// chain, or from a store with none: the chain then starts from zeros).
func (c *importChain) start(im *importer, floorHash string) error {
	c.base = driver.ZeroChainHash
	if floorHash != "" {
		h, err := hex.DecodeString(floorHash)
		if err != nil || len(h) != driver.ChainHashSize {
			return im.errf("floor_hash %.80q is not %d hex bytes", floorHash, driver.ChainHashSize)
		}
		c.base = h
	}
	c.prev = c.base
	return nil
}

// link checks event e's hash, as the archive gives it, against the one
// computed from the chain so far. Events without a hash may only come
// before the first with one (written before the exporting store kept the
// chain).
func (c *importChain) link(im *importer, e workspace.Event, hash string) error {
	if hash == "" {
		if c.chained {
			return im.errf("event %d has no hash, after events with one", e.Seq)
		}
		im.unchained++
		return nil
	}
	got, err := hex.DecodeString(hash)
	if err != nil || len(got) != driver.ChainHashSize {
		return im.errf("event %d: hash %.80q is not %d hex bytes", e.Seq, hash, driver.ChainHashSize)
	}
	want := driver.ChainHash(c.prev, e)
	if !bytes.Equal(got, want) {
		return im.errf("event %d: its hash does not match its content and the chain before it: the archive was changed", e.Seq)
	}
	c.chained, c.prev = true, got
	return nil
}

// setBase gives the store the chain's base, in the transaction that
// appends the log's first event (first), or that sets the floor of a log
// with none. It keeps no state, so a transaction run again does it again.
func (c *importChain) setBase(ctx context.Context, tx driver.Tx, first bool) error {
	if !first || c.base == nil {
		return nil
	}
	return tx.SetChainBase(ctx, c.base)
}
