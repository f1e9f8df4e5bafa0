package jsonstore

import (
	"context"
	"log/slog"

	"github.com/agentspace/agentspace/workspace"
)

func init() { workspace.Register("json", driver{}) }

// driver opens json: DSNs; Config.Target is the directory.
type driver struct{}

func (driver) Open(ctx context.Context, cfg workspace.Config) (workspace.Store, error) {
	return openStore(ctx, cfg)
}

func (driver) Params() []string { return nil }

func (driver) OpenMigrator(ctx context.Context, cfg workspace.Config) (workspace.Migrator, error) {
	if cfg.Target == "" {
		return nil, &workspace.InvalidError{Field: "dsn", Reason: "json: needs a directory, e.g. json:./ws"}
	}
	f, err := openFormat(cfg.Target)
	if err != nil {
		return nil, err
	}
	return &migrator{f: f}, nil
}

var _ workspace.MigratingDriver = driver{}

// Open opens (creating it if needed) the workspace in dir, for programs
// that do not go through a DSN. autoMigrate lets it migrate an older
// format; otherwise an older one gives a *workspace.SchemaError.
func Open(ctx context.Context, dir string, autoMigrate bool, opts workspace.Options) (workspace.Workspace, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	st, err := openStore(ctx, workspace.Config{Scheme: "json", DSN: "json:" + dir, Target: dir, AutoMigrate: autoMigrate, Logger: logger})
	if err != nil {
		return nil, err
	}
	return workspace.New(st, opts), nil
}
