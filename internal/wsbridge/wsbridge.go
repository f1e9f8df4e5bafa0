// Package wsbridge carries the one untyped value of the seam between
// package workspace and the code that implements a *workspace.Workspace
// (the engine, the HTTP client, the registry of schemes), which reaches it
// typed through internal/wsconn.
//
// It is the one residual any of that seam, and it cannot be typed:
// internal/wsconn imports package workspace, so workspace cannot import it
// to hand it anything; a package below workspace cannot name workspace's
// types; and a typed hook exported by workspace would be in the user's
// API. So workspace puts its bridge value here, and internal/wsconn
// asserts it to its typed interface once, when it is initialized.
package wsbridge

// Workspace is package workspace's bridge value, set by its init (which
// runs before that of any package that imports workspace) and read by
// internal/wsconn only.
var Workspace any
