package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

func init() { driver.Register("json", engine.Backend(jsonDriver{})) }

// driver opens json: DSNs; Config.Target is the directory.
type jsonDriver struct{}

func (jsonDriver) Open(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	return openStore(ctx, cfg)
}

func (jsonDriver) Params() []string { return nil }

// LatestFormat is the newest format version of the tree this code knows.
func LatestFormat() uint { return latestFormat }

// Probe reports whether cfg.Target is a workspace, creating nothing (it
// is driver.Driver's Probe, for workspace.Options.MustExist): the
// directory must exist and hold a FORMAT file with a version.
func (jsonDriver) Probe(ctx context.Context, cfg driver.Config) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := cfg.Target
	if dir == "" {
		return &workspace.InvalidError{Field: "dsn", Reason: "json: needs a directory, e.g. json:./ws"}
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &workspace.NoWorkspaceError{Where: dir, Reason: "the directory does not exist"}
	case err != nil:
		return fmt.Errorf("json: %w", err)
	case !fi.IsDir():
		return &workspace.NoWorkspaceError{Where: dir, Reason: "it is a file, not a directory"}
	}
	data, err := os.ReadFile(filepath.Join(dir, formatFile)) // #nosec G304 -- the workspace's own FORMAT file, in the directory the DSN names
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &workspace.NoWorkspaceError{Where: dir, Reason: "the directory has no " + formatFile + " file"}
	case err != nil:
		return fmt.Errorf("json: %w", err)
	}
	v, dirty, err := parseFormat(data)
	if err != nil {
		return fmt.Errorf("json: %s: %w", dir, err)
	}
	if v == 0 && !dirty {
		return &workspace.NoWorkspaceError{Where: dir, Reason: "its format version is 0 (every migration was undone)"}
	}
	return nil
}

func (jsonDriver) OpenMigrator(ctx context.Context, cfg driver.Config) (workspace.Migrator, error) {
	if cfg.Target == "" {
		return nil, &workspace.InvalidError{Field: "dsn", Reason: "json: needs a directory, e.g. json:./ws"}
	}
	f, err := openFormat(cfg.Target)
	if err != nil {
		return nil, err
	}
	return &migrator{f: f}, nil
}

var _ driver.MigratingDriver = jsonDriver{}

// Open opens (creating it if needed) the workspace in dir, for programs
// that do not go through a DSN. autoMigrate lets it migrate an older
// format; otherwise an older one gives a *workspace.SchemaError.
func Open(ctx context.Context, dir string, autoMigrate bool, opts workspace.Options) (*workspace.Workspace, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	st, err := openStore(ctx, driver.Config{Scheme: "json", DSN: "json:" + dir, Target: dir, AutoMigrate: autoMigrate, Logger: logger})
	if err != nil {
		return nil, err
	}
	return engine.New(st, opts), nil
}
