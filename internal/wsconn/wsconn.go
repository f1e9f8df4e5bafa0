// Package wsconn hands package workspace the connections it wraps: the
// engine's handle (package driver) and the HTTP client (backend/remote)
// each implement the methods of a *workspace.Workspace, and become one
// through Wrap. It lives under internal so that the hook is not part of
// anyone's API: a store outside this module is written as a driver.Driver.
package wsconn

import "context"

// Wrap makes a *workspace.Workspace of c, which must have the methods of
// workspace's conn set (Artifacts, Tasks, Notes, Locks, Events, Commit,
// Status, Close); it panics otherwise, which is a bug in this module.
// Package workspace sets it in its init, which runs before any package
// that imports workspace.
var Wrap func(c any) any

// Of returns the connection a *workspace.Workspace wraps (nil for nil).
var Of func(ws any) any

// Open and OpenMigrator are workspace.Open and workspace.OpenMigrator
// (opts is a []workspace.Options; the results are a *workspace.Workspace
// and a workspace.Migrator). Package driver, which keeps the registry of
// schemes, sets them in its init; they are nil in a program that links
// no backend.
var (
	Open         func(ctx context.Context, dsn string, opts any) (any, error)
	OpenMigrator func(ctx context.Context, dsn string, opts any) (any, error)
)

// NewSubscription starts a *workspace.Subscription fed by run, a
// func(context.Context, func(workspace.Message) bool) error, holding
// buffer messages ahead of its consumer (SubscribeRequest.Buffer; the
// default when < 1): the stream behind Events.Subscribe of the engine's
// handle and of the HTTP client. Package workspace sets it in its init.
var NewSubscription func(ctx context.Context, buffer int, run any) any
