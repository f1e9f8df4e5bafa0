package bench

import (
	"context"
	"fmt"

	"github.com/agentspace/agentspace/workspace/driver"
)

// rawStore is a raw baseline: the bare driver doing each workload's minimal
// statements on the same kind of store, in tables of its own.
type rawStore interface {
	// op returns the baseline for s, or nil if there is none, and a cleanup.
	op(ctx context.Context, s spec) (op, func(), error)
	// walSyncs returns a server-wide count of WAL syncs, if the store has one.
	walSyncs(ctx context.Context) (int64, bool)
	close()
}

// openRaw opens the baseline for e's backend next to e's store.
func openRaw(ctx context.Context, e *env) (rawStore, error) {
	p, err := driver.ParseDSN(e.dsn)
	if err != nil {
		return nil, err
	}
	switch e.backend {
	case "sqlite":
		return openRawSQLite(ctx, p.Config, len(e.handles), e.prefix)
	case "postgres":
		return openRawPostgres(ctx, p.Config, e.prefix)
	case "json":
		return openRawFile(p.Config.Target, e.prefix)
	}
	return noRaw{}, nil
}

// noRaw is the baseline of a backend we know no raw equivalent for.
type noRaw struct{}

func (noRaw) op(context.Context, spec) (op, func(), error) { return nil, func() {}, nil }
func (noRaw) walSyncs(context.Context) (int64, bool)       { return 0, false }
func (noRaw) close()                                       {}
func errRows(what string, n int64) error {
	return fmt.Errorf("raw %s: %d rows affected, want 1", what, n)
}
