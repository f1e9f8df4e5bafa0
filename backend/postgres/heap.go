package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// keepHeap is what every connection of a pool the store opens runs once,
// when it connects: a single allocation of 1 MiB in its server process,
// freed at the statement's end.
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
// Invariant: it changes nothing the connection's session can see (no
// setting, no object), costs one round trip and about 0.2 ms of the
// server's CPU per connection, and with a malloc other than glibc's it is
// only an allocation. The store's own pools run it; a pool a program hands
// OpenPool is left as it is.
const keepHeap = `SELECT length(repeat('x', 1048576))`

// afterConnect runs keepHeap on a new connection.
func afterConnect(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, keepHeap); err != nil {
		return fmt.Errorf("postgres: prepare the connection: %w", err)
	}
	return nil
}
