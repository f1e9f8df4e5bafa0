// Package wsconn is the typed seam between package workspace and the code
// that implements a *workspace.Workspace: the engine's handle
// (workspace/engine) and the HTTP client (backend/remote) each have the
// methods of Conn and become a *workspace.Workspace through Wrap, and the
// registry of schemes (workspace/driver) serves workspace.Open through
// Serve; PrincipalFrom reads the principal a context carries, for the code
// that checks it. It lives under internal so that none of it is in anyone's API: a
// store outside this module is written as a driver.Driver.
//
// Package workspace hands its side over through internal/wsbridge, the
// seam's one untyped value (its doc says why); this package asserts it to
// the typed bridge once, when it is initialized, after workspace's init.
package wsconn

import (
	"context"

	"github.com/agentspace/agentspace/internal/wsbridge"
	"github.com/agentspace/agentspace/workspace"
)

// Conn is what a *workspace.Workspace wraps: the engine's handle or the
// HTTP client. The admin operations are optional interfaces of it, which
// the Workspace's methods assert. It is an alias of an interface literal
// so that it is the very type package workspace wraps, which cannot be
// named from here.
type Conn = interface {
	Artifacts() workspace.Artifacts
	Tasks() workspace.Tasks
	Notes() workspace.Notes
	Locks() workspace.Locks
	Events() workspace.Events
	Commit(ctx context.Context, b workspace.Batch) (workspace.BatchResult, error)
	Status(ctx context.Context) (workspace.Status, error)
	Close() error
}

// bridge is the method set of package workspace's value in
// internal/wsbridge.
type bridge interface {
	Wrap(c Conn) *workspace.Workspace
	Of(ws *workspace.Workspace) Conn
	NewSubscription(ctx context.Context, buffer int, run func(context.Context, func(workspace.Message) bool) error) *workspace.Subscription
	Serve(open func(context.Context, string, []workspace.Options) (*workspace.Workspace, error),
		openMigrator func(context.Context, string, []workspace.Options) (workspace.Migrator, error))
	PrincipalFrom(ctx context.Context) (workspace.Principal, bool)
}

// ws is package workspace's bridge. Package workspace is initialized
// before this package (this package imports it), so the value is set; a
// value of other methods is a bug in this module, found by any test.
var ws = func() bridge {
	b, ok := wsbridge.Workspace.(bridge)
	if !ok {
		panic("internal/wsconn: package workspace left no bridge of the expected methods in internal/wsbridge")
	}
	return b
}()

// Wrap makes a *workspace.Workspace of c.
func Wrap(c Conn) *workspace.Workspace { return ws.Wrap(c) }

// Of returns the connection w wraps (nil for a nil w).
func Of(w *workspace.Workspace) Conn { return ws.Of(w) }

// NewSubscription starts a *workspace.Subscription fed by run, holding
// buffer messages ahead of its consumer (SubscribeRequest.Buffer; the
// default when < 1): the stream behind Events.Subscribe of the engine's
// handle and of the HTTP client. run is called once, in the
// subscription's goroutine, with a context that ends when ctx does or the
// subscription is closed; it sends each message with send, which reports
// false once that context has ended, and returns why the stream ended.
func NewSubscription(ctx context.Context, buffer int, run func(ctx context.Context, send func(workspace.Message) bool) error) *workspace.Subscription {
	return ws.NewSubscription(ctx, buffer, run)
}

// PrincipalFrom returns the principal ctx carries (workspace.WithPrincipal,
// workspace.AsActor), for the code that checks it: the engine, the HTTP
// client, the faces and the workflows. A context without one reads
// unchecked: the in-process caller is trusted with what it could open
// anyway (see docs/policy.md).
func PrincipalFrom(ctx context.Context) (workspace.Principal, bool) { return ws.PrincipalFrom(ctx) }

// Serve makes workspace.Open and workspace.OpenMigrator call open and
// openMigrator (opts as the caller gave them). The registry of schemes
// (workspace/driver) calls it from its init; until then, in a program
// that links no backend, both refuse every DSN.
func Serve(open func(ctx context.Context, dsn string, opts []workspace.Options) (*workspace.Workspace, error),
	openMigrator func(ctx context.Context, dsn string, opts []workspace.Options) (workspace.Migrator, error)) {
	ws.Serve(open, openMigrator)
}
