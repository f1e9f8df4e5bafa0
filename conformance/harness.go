// Package conformance is the suite every agentspace backend must pass,
// unchanged, under go test -race. A backend hooks in with one line:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }
//
// and a backend of package driver with a second, which runs the suite's
// cases with the store's optional capabilities hidden (see RunFloor):
//
//	func TestConformanceFloor(t *testing.T) { conformance.RunFloor(t, harness{}) }
//
// Tests that are about processes re-execute the test binary: when the
// binary starts as a child, Run plays the child's part and exits, so the
// same one line covers them.
package conformance

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Harness hands out fresh, empty stores.
type Harness interface {
	// NewDSN returns the DSN of a new, empty store, removed with t.Cleanup.
	// The suite opens as many handles on it as it needs.
	NewDSN(t testing.TB) string
}

// Inapplicable is an optional Harness capability, for a backend to which
// some cases cannot apply (a client of a server elsewhere cannot reach the
// store's own read paths, nor set the server's options): it names those
// cases (by their t.Run name, as in "ReopenKeepsEverything") with the
// reason, and Run reports each as skipped with that reason. Every case not
// named must pass.
type Inapplicable interface {
	Harness
	Inapplicable() map[string]string
}

// Backing is an optional Harness capability, for a backend whose handles
// reach a store elsewhere (a client of a server): StoreDSN returns the DSN
// of the store behind dsn, which NewDSN returned, so that a case can run
// there what runs only where the store is (gc) and check it through dsn.
type Backing interface {
	Harness
	StoreDSN(dsn string) string
}

// storeDSN returns the DSN of the store behind dsn: dsn itself unless h
// is a Backing.
func storeDSN(h Harness, dsn string) string {
	if p, ok := h.(private); ok {
		h = p.Harness
	}
	if b, ok := h.(Backing); ok {
		return b.StoreDSN(dsn)
	}
	return dsn
}

// inapplicable returns why case name cannot apply to h, if h says so.
func inapplicable(h Harness, name string) (string, bool) {
	if p, ok := h.(private); ok {
		h = p.Harness
	}
	ia, ok := h.(Inapplicable)
	if !ok {
		return "", false
	}
	why, ok := ia.Inapplicable()[name]
	return why, ok
}

// childEnv carries a child process's role; see processes.go.
const childEnv = "AGENTSPACE_CONFORMANCE_CHILD"

// RunCore runs the suite's core cases against h: every operation, the
// policies and retention, each case on a store of its own, in parallel. It
// is for a harness that differs from one Run already proves only in what
// the store is allowed to do (a database role's rights), where the
// concurrency and fault cases would exercise nothing the core ones do not.
func RunCore(t *testing.T, h Harness) {
	if os.Getenv(childEnv) != "" {
		runChild(t)
		return
	}
	runCore(t, private{h})
}

// Run runs the whole suite against h. Each case gets its own store.
func Run(t *testing.T, h Harness) {
	if os.Getenv(childEnv) != "" {
		runChild(t)
		return
	}
	// Handles on one DSN in one process share one store unless they ask
	// for their own (workspace.Options.Private). Cases that open several
	// handles stand in for several agents: the core cases give each its own
	// store, the harder path (another process's handles take it too); the
	// concurrent ones run both ways.
	runCore(t, private{h})
	runConcurrency(t, h)
	runReliability(t, h)
}

// private hands out DSNs whose handles each get a store of their own, as
// handles in different processes have.
type private struct{ Harness }

func (p private) NewDSN(t testing.TB) string {
	return dsnWith(p.Harness.NewDSN(t), "ws_private", "true")
}

// open opens a handle on dsn, closed with t.Cleanup.
func open(t testing.TB, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", workspace.RedactDSN(dsn), err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// fresh returns a new store's DSN and one handle on it.
func fresh(t testing.TB, h Harness) (string, *workspace.Workspace) {
	t.Helper()
	dsn := h.NewDSN(t)
	return dsn, open(t, dsn)
}

// testCtx is a context bounded so that a hung backend fails the case
// instead of the whole run. It guards against hangs, not slowness: the
// longest case (InjectionShapedInputIsExactOrInvalid, some two hundred
// hostile inputs, 1 MiB ones among them, through one workspace) takes over
// two minutes through the remote backend's server on a loaded 2-core
// machine.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
