// Package testskip turns a test's skip into a failure where the run says
// it must not skip: a test that needs something the machine may lack (a
// PostgreSQL server, node, python3, chromium, pgbouncer, a tmpfs mount, a
// reflink file system) skips loudly on a developer's machine, and fails
// where an AGENTSPACE_TEST_REQUIRE_* variable says that part must run, as
// .ci/run sets each of them. It is for tests only: it reads the
// environment.
package testskip

import (
	"fmt"
	"os"
	"testing"
)

// Required reports whether the environment variable env requires what it
// names: it is set to "1", the one value .ci/run and the docs use.
func Required(env string) bool {
	return os.Getenv(env) == "1"
}

// Skip skips t with the message format and args or, when env is
// Required, fails it with that message, saying which variable forbade the
// skip: there a skip would hide a regression. It does not return.
func Skip(t testing.TB, env, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(env) {
		t.Fatalf("%s=1, so this may not skip: %s", env, msg)
	}
	t.Skip(msg)
}
