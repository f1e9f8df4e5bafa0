package postgres

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// keepHeap is what every connection of a pool the store opens runs once,
// once it has been in use a while (keepHeapAfter): a single allocation of
// 1 MiB in its server process, freed at the statement's end.
//
// Why: glibc's malloc returns the top of a process's heap to the kernel
// once 128 KiB of it is free, and takes 128 KiB more than it needs when
// it grows. A write statement of ours needs about that much for its plan's
// state (the event append's chain and unnest, a predicted group's check,
// an artifact's write), so a PostgreSQL backend serving a group's writes
// grew its heap and gave it back about twice per commit: the kernel's
// brk, the page faults that refill the pages, and, when the heap shrinks,
// a TLB flush on every CPU that ran the process. perf put the brk calls
// and their faults at 7-20% of PostgreSQL's CPU under W1 from 16
// processes through a server. An allocation above malloc's 128 KiB mmap
// threshold, once freed, raises that threshold to its size and the trim
// threshold to twice it, for the process's life: after this statement
// the backend keeps up to 2 MiB of free heap and reuses it. Measured the
// same way, the brk calls are gone and the backends' page faults fall
// from 1.3-2.3 to 0.5-0.7 per write (TestBackendsKeepTheirHeap checks
// the difference).
//
// When: a connection runs it the 64th time it is taken from the pool
// (keepHeapAfter), not when it connects. Touching 1 MiB costs the server
// 256 page faults: about 6 ms of its CPU on the paravirtualised 2-core VM
// CI runs on (300 calls in one session). A
// connection that serves a one-shot command (a wsctl call) or a short
// test ends before the brk calls it would save add up to that; one that
// a server keeps pays it once, early in a life of many thousand writes.
//
// Invariant: it changes nothing the connection's session can see (no
// setting, no object), costs one round trip once per connection, and
// with a malloc other than glibc's it is only an allocation. The store's
// own pools run it; a pool a program hands OpenPool is left as it is.
// The 1 MiB is built as 1,024 copies of 1 KiB: repeat copies its unit
// once per count, and a million one-byte copies cost more (8.4 ms
// against 6.3-7.1 ms a call, measured as above); octet_length reads the
// length where length would count the characters.
const keepHeap = `SELECT octet_length(repeat(repeat('x', 1024), 1024))`

// defaultKeepHeapAfter is the take from the pool on which a connection
// runs keepHeap.
const defaultKeepHeapAfter = 64

// keepHeapAfter, when not 0, replaces defaultKeepHeapAfter (tests set it
// lower to watch the heap soon after).
var keepHeapAfter atomic.Int64

// keepHeapTake is the take on which a connection runs keepHeap.
func keepHeapTake() int64 {
	if n := keepHeapAfter.Load(); n != 0 {
		return n
	}
	return defaultKeepHeapAfter
}

// usesKey counts a connection's takes in its pgconn.CustomData.
const usesKey = "agentspace.takes"

// prepareConn counts the takes of a connection from the pool and runs
// keepHeap on the keepHeapAfter-th. A connection on which it fails is
// dropped, and the pool takes another (pgxpool's contract for false).
func prepareConn(ctx context.Context, c *pgx.Conn) (bool, error) {
	data := c.PgConn().CustomData()
	n, _ := data[usesKey].(int64)
	n++
	data[usesKey] = n
	if n != keepHeapTake() {
		return true, nil
	}
	if _, err := c.Exec(ctx, keepHeap); err != nil {
		return false, nil
	}
	return true, nil
}
