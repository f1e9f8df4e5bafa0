package sqlite

import (
	"context"
	"path/filepath"
	"sync"
)

// A gate queues the writers of one database file in this process. Handles
// on one file each have their own writer connection; without the gate they
// would meet at SQLite's write lock, whose busy handler sleeps and retries
// (1 ms, then up to 100 ms a try) and serves nobody in order, so under load
// a write could wait seconds behind later ones. Through the gate they wait
// in a Go channel, in arrival order, and the next one starts the moment the
// last one commits. Writers in other processes still meet at the file lock.
type gate struct {
	ch   chan struct{}
	refs int
}

var gates = struct {
	sync.Mutex
	m map[string]*gate
}{m: map[string]*gate{}}

// gateKey names a file for the gate: its absolute path, so "ws.db" and
// "./ws.db" share one. Other aliases (links) only lose the queueing.
func gateKey(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// openGate returns the gate of the file at path, counting a user of it.
func openGate(path string) *gate {
	gates.Lock()
	defer gates.Unlock()
	k := gateKey(path)
	g := gates.m[k]
	if g == nil {
		g = &gate{ch: make(chan struct{}, 1)}
		gates.m[k] = g
	}
	g.refs++
	return g
}

// closeGate drops a user of path's gate, forgetting the gate with the last.
func closeGate(path string) {
	gates.Lock()
	defer gates.Unlock()
	k := gateKey(path)
	if g := gates.m[k]; g != nil {
		if g.refs--; g.refs == 0 {
			delete(gates.m, k)
		}
	}
}

// enter waits for the gate in arrival order, or until ctx ends.
func (g *gate) enter(ctx context.Context) error {
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

func (g *gate) leave() {
	if g != nil {
		<-g.ch
	}
}
