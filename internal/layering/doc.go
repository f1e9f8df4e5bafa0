// Package layering holds the tests that keep the module's floors: each
// package imports only packages of lower floors (the table in
// docs/architecture.md, the one place they are written), the remote
// backend links no server, and no backend's test binary links the
// benchmarks. It has no code of its own.
package layering
