package driver

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentspace/agentspace/workspace"
)

// The registry: a Driver registered here is a Backend whose Open
// wraps the driver's store in the engine, sharing one core between the
// handles a process opens on one DSN with the same options (share.go).

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes d the driver of scheme, for workspace.Open and
// workspace.OpenMigrator. It is meant to be called from a backend's init;
// registering a scheme twice, or a nil driver, panics.
func Register(scheme string, d Driver) {
	if d == nil {
		panic("driver: Register driver is nil")
	}
	var b Backend = backend{d}
	if md, ok := d.(MigratingDriver); ok {
		b = migratingBackend{backend{d}, md}
	}
	RegisterBackend(scheme, b)
	driversMu.Lock()
	drivers[scheme] = d
	driversMu.Unlock()
}

// OpenStore opens the store p names with the Driver registered for its
// scheme, without the engine: for a program that wraps the store (a test's
// fault injector, a benchmark's counter) before it calls New.
func OpenStore(ctx context.Context, p ParsedDSN) (Store, error) {
	driversMu.RLock()
	d := drivers[p.Config.Scheme]
	driversMu.RUnlock()
	if d == nil {
		return nil, fmt.Errorf("scheme %q has no driver registered with driver.Register", p.Config.Scheme)
	}
	return d.Open(ctx, p.Config)
}

// backend is a registered Driver as a Backend.
type backend struct{ d Driver }

func (b backend) Params() []string { return b.d.Params() }

// Open opens cfg's store and wraps it in the engine: on a core of its own
// with opts.Private, else on the core shared by the process's handles on
// the same store with the same options.
func (b backend) Open(ctx context.Context, cfg Config, opts workspace.Options) (*workspace.Workspace, error) {
	opts = opts.WithDefaults()
	open := func() (Store, error) {
		if opts.MustExist {
			if err := b.d.Probe(ctx, cfg); err != nil {
				return nil, err
			}
		}
		return b.d.Open(ctx, cfg)
	}
	if opts.Private {
		st, err := open()
		if err != nil {
			return nil, err
		}
		return New(st, opts), nil
	}
	key, err := shareKey(cfg, opts)
	if err != nil {
		return nil, err
	}
	return openShared(ctx, key, opts, open)
}

// migratingBackend is a registered MigratingDriver.
type migratingBackend struct {
	backend
	md MigratingDriver
}

func (b migratingBackend) OpenMigrator(ctx context.Context, cfg Config, opts workspace.Options) (workspace.Migrator, error) {
	if opts.MustExist {
		if err := b.d.Probe(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return b.md.OpenMigrator(ctx, cfg)
}
