// Package filegate queues the writers of one file-backed store that are in
// this process.
//
// Handles on one SQLite file (or one json directory) each hold their own
// connection or lock descriptor. Without a gate their writers would meet at
// the file lock: SQLite's busy handler sleeps and retries (1 ms, then up to
// 100 ms a try) and serves nobody in order, and a blocked flock ignores
// contexts, so under load a write could wait seconds behind later ones.
// Through the gate they wait in a Go channel, in arrival order, for as long
// as their context allows, and the next starts the moment the last one
// commits. Writers in other processes still meet at the file lock.
package filegate

import (
	"context"
	"path/filepath"
	"sync"
)

// Gate is one store's queue. A nil *Gate lets everyone through.
type Gate struct {
	key  string
	ch   chan struct{}
	refs int // guarded by gates
}

var gates = struct {
	sync.Mutex
	m map[string]*Gate
}{m: map[string]*Gate{}}

// key names a file for the gate: its absolute path, so "ws.db" and
// "./ws.db" share one. Other aliases (links) only lose the queueing.
func key(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// Open returns the gate of the store at path, counting a user of it; each
// Open is matched by one Close of the gate it returned.
func Open(path string) *Gate {
	gates.Lock()
	defer gates.Unlock()
	k := key(path)
	g := gates.m[k]
	if g == nil {
		g = &Gate{key: k, ch: make(chan struct{}, 1)}
		gates.m[k] = g
	}
	g.refs++
	return g
}

// Close drops the user of g that Open counted, forgetting the gate with
// the last one. It uses the key Open computed, so a change of working
// directory in between does not matter.
func (g *Gate) Close() {
	if g == nil {
		return
	}
	gates.Lock()
	defer gates.Unlock()
	if g.refs--; g.refs == 0 && gates.m[g.key] == g {
		delete(gates.m, g.key)
	}
}

// Enter waits for the gate in arrival order, or until ctx ends. Every
// successful Enter is matched by one Leave.
func (g *Gate) Enter(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave lets the next writer in.
func (g *Gate) Leave() {
	if g != nil {
		<-g.ch
	}
}
