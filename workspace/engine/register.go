package engine

import (
	"context"
	"fmt"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Backend makes d the driver.Backend a store's package registers for its
// schemes (driver.Register(scheme, engine.Backend(d)), from its init). Its
// Open wraps d's store in the engine, sharing one core between the handles
// a process opens on one DSN with the same options (share.go); when d is a
// driver.MigratingDriver it is a driver.MigratingBackend too. A nil d
// panics: it is a bug in the caller's init.
func Backend(d driver.Driver) driver.Backend {
	if d == nil {
		panic("engine: Backend driver is nil")
	}
	if md, ok := d.(driver.MigratingDriver); ok {
		return migratingBackend{backend{d}, md}
	}
	return backend{d}
}

// OpenStore opens the store p names with the Driver its scheme's backend
// wraps, without the engine: for a program that wraps the store (a test's
// fault injector, a benchmark's counter) before it calls New.
func OpenStore(ctx context.Context, p driver.ParsedDSN) (driver.Store, error) {
	d, err := DriverOf(p)
	if err != nil {
		return nil, err
	}
	return d.Open(ctx, p.Config)
}

// DriverOf returns the Driver p's scheme's backend wraps: for a test of
// the driver contract itself (Probe, driver.ExistingOpener), or an error
// when the scheme's backend is not one of Backend's.
func DriverOf(p driver.ParsedDSN) (driver.Driver, error) {
	switch b := p.Backend.(type) {
	case backend:
		return b.d, nil
	case migratingBackend:
		return b.d, nil
	}
	return nil, fmt.Errorf("scheme %q has no store driver registered (driver.Register with engine.Backend)", p.Config.Scheme)
}

// backend is a Driver as a Backend.
type backend struct{ d driver.Driver }

func (b backend) Params() []string { return b.d.Params() }

// Open opens cfg's store and wraps it in the engine: on a core of its own
// with opts.Private, else on the core shared by the process's handles on
// the same store with the same options.
func (b backend) Open(ctx context.Context, cfg driver.Config, opts workspace.Options) (*workspace.Workspace, error) {
	opts = opts.WithDefaults()
	open := func() (driver.Store, error) {
		if opts.MustExist {
			if eo, ok := b.d.(driver.ExistingOpener); ok {
				return eo.OpenExisting(ctx, cfg)
			}
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

// migratingBackend is a MigratingDriver as a MigratingBackend.
type migratingBackend struct {
	backend
	md driver.MigratingDriver
}

func (b migratingBackend) OpenMigrator(ctx context.Context, cfg driver.Config, opts workspace.Options) (workspace.Migrator, error) {
	if opts.MustExist {
		if err := b.d.Probe(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return b.md.OpenMigrator(ctx, cfg)
}
