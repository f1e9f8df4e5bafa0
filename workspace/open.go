package workspace

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentspace/agentspace/internal/redact"
)

// Options tune a handle. The zero value means the defaults.
type Options struct {
	// MaxArtifactSize limits one artifact version's content (default 32 MiB).
	MaxArtifactSize int64
	// IdempotencyTTL is how long idempotency keys are kept (default 24h).
	IdempotencyTTL time.Duration
	// PollInterval is how often the store is looked at for other processes'
	// writes when it cannot notify (default 50ms).
	PollInterval time.Duration
	// Logger receives diagnostics (default: slog.Default()).
	Logger *slog.Logger
	// GroupWait bounds how long the committer, about to start a group
	// commit, waits for writers it expects: as many as the last
	// transaction saw, whose writers it has just answered (default 2ms;
	// never more than half the last transaction's time; negative:
	// never wait; ws_group_wait in the DSN, 0 for never). Waiting lets
	// writers in a loop share one commit instead of alternating between
	// two; a single writer never waits.
	GroupWait time.Duration
	// Private gives the handle a store of its own (its own connections, its
	// own writer queue and event hub) rather than sharing one with the
	// process's other handles opened on the same DSN with the same options
	// (ws_private=true in the DSN). Shared handles group their writes into
	// common commits; a private one behaves as a handle in another process
	// would. Handles from a backend's own constructor are always private.
	Private bool
	// MustExist makes Open and OpenMigrator open only a workspace that was
	// created before (by an Open without it, or a migration), and fail with
	// a *NoWorkspaceError, creating nothing, where there is none: a read
	// on a mistyped path or schema then says so instead of leaving an empty
	// store behind. Every driver.Driver can tell (its Probe).
	MustExist bool
	// PolicyRecheck bounds how stale the workspace's policy may be when an
	// operation is checked against it: the handle reads the policy's head
	// again when its copy was confirmed longer ago than this (default
	// 100ms; negative: read it for every operation; ws_policy_recheck in
	// the DSN, 0 for every operation). A handle's own policy change binds
	// at once on that handle whatever the setting. A longer bound saves a
	// read on a handle whose operations come further apart than that.
	PolicyRecheck time.Duration
	// Clock, when set, is the time messages' deadlines are set from and
	// checked against, in place of the store's clock: for tests that
	// drive escalation without waiting. Leave it nil in programs.
	Clock func() time.Time
}

// WithDefaults returns o with every zero field set to its default, as
// every handle applies them.
func (o Options) WithDefaults() Options {
	if o.MaxArtifactSize <= 0 {
		o.MaxArtifactSize = DefaultMaxArtifactSize
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.GroupWait == 0 {
		o.GroupWait = DefaultGroupWait
	}
	if o.PolicyRecheck == 0 {
		o.PolicyRecheck = DefaultPolicyRecheck
	}
	return o
}

// Open opens the workspace dsn names, e.g. "sqlite:.agentspace/workspace.db",
// "json:./ws", "postgres://user@host/db?ws_schema=team1". The backend for the
// scheme must be imported (for its init). opts, if given, override the
// DSN's ws_ parameters field by field.
//
// Handles opened on one DSN with the same options in one process share
// their store, so that their writers share commits; each handle still
// closes on its own. Options.Private opts out.
func Open(ctx context.Context, dsn string, opts ...Options) (*Workspace, error) {
	if opener == nil {
		return nil, noBackend(dsn)
	}
	return opener(ctx, dsn, opts)
}

// OpenMigrator opens dsn's store for schema migration only: no schema
// check. Of opts, only MustExist applies: without it, a store that does not
// exist is created empty (schema version 0).
func OpenMigrator(ctx context.Context, dsn string, opts ...Options) (Migrator, error) {
	if migratorOpener == nil {
		return nil, noBackend(dsn)
	}
	return migratorOpener(ctx, dsn, opts)
}

// opener and migratorOpener are what Open and OpenMigrator call: the
// registry of schemes (workspace/driver) sets them from its init, through
// internal/wsconn.Serve; they stay nil in a program that links no backend.
var (
	opener         func(context.Context, string, []Options) (*Workspace, error)
	migratorOpener func(context.Context, string, []Options) (Migrator, error)
)

// noBackend is Open's error when no backend package is linked at all.
func noBackend(dsn string) error {
	return invalid("dsn", "no backend is registered for %s: import one, e.g. _ %q", RedactDSN(dsn), "github.com/agentspace/agentspace/backend/sqlite")
}

// RedactDSN returns dsn with any password (and a server's ws_token)
// replaced by "xxxxx", for messages and logs.
func RedactDSN(dsn string) string { return redact.DSN(dsn) }

// attacher is the conn capability Attach uses.
type attacher interface {
	Attach() (*Workspace, error)
}

// Attach returns another handle on the store ws is open on, as Open does
// for a second handle on one DSN: it shares ws's store, writer queue and
// event hub, and closes on its own; the store closes with the last of its
// handles. It serves handles made by a backend's own constructor, and ws
// may be closed before the new handle is. A closed ws gives ErrClosed.
func (ws *Workspace) Attach() (*Workspace, error) {
	a, ok := ws.c.(attacher)
	if !ok {
		return nil, ws.unsupported("attach")
	}
	return a.Attach()
}
