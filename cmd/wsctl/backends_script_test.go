package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
)

// fileStores make DSNs of fresh stores under $WORK for the file backends.
var fileStores = map[string]func(work, name string) string{
	"sqlite": func(work, name string) string { return "sqlite:" + filepath.Join(work, name+".db") },
	"json":   func(work, name string) string { return "json:" + filepath.Join(work, name) },
}

// requireScheme fails the test if wsctl does not link the backend of scheme.
func requireScheme(t *testing.T, scheme string) {
	t.Helper()
	if !slices.Contains(driver.Schemes(), scheme) {
		t.Fatalf("wsctl does not link the %s backend: add its import to backends.go", scheme)
	}
}

// TestScriptsOnEveryBackend runs testdata/script/*.txtar against fresh
// stores of each backend: the same commands, outputs and exit codes everywhere.
// The backends run at once, and beside the other script tests: a script
// mostly waits for the wsctl it runs, and the scripts of one backend
// alone leave the test's slots idle while its longest script ends.
func TestScriptsOnEveryBackend(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"sqlite", "json"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			requireScheme(t, scheme)
			testscript.Run(t, scriptParams("testdata/script", fileStores[scheme]))
		})
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		requireScheme(t, "postgres")
		pgtest.ServerDSN(t) // skips with one loud line, or fails under AGENTSPACE_TEST_REQUIRE_POSTGRES=1
		testscript.Run(t, scriptParams("testdata/script", func(string, string) string { return pgtest.NewDSN(t) }))
	})
}

// TestScriptsOnSQLite runs what only sqlite can show today: a schema with
// more than one migration.
func TestScriptsOnSQLite(t *testing.T) {
	t.Parallel()
	requireScheme(t, "sqlite")
	testscript.Run(t, scriptParams("testdata/sqlite", fileStores["sqlite"]))
}

// TestArchiveRoundTripAcrossBackends moves one workspace sqlite -> json ->
// sqlite -> postgres with export and import, and requires every export to
// be the same bytes.
func TestArchiveRoundTripAcrossBackends(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"sqlite", "json", "postgres"} {
		requireScheme(t, scheme)
	}
	// The server is looked for in a subtest, so that its absence skips
	// only the postgres leg (loudly; a failure under AGENTSPACE_TEST_REQUIRE_POSTGRES=1).
	pg, server := "", ""
	t.Run("postgres-server", func(t *testing.T) { server = pgtest.ServerDSN(t) })
	if server != "" {
		pg = pgtest.NewDSN(t)
	}
	p := scriptParams("testdata/roundtrip", fileStores["sqlite"])
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("JSON_DSN", fileStores["json"](env.WorkDir, "b"))
		env.Setenv("SQLITE2_DSN", fileStores["sqlite"](env.WorkDir, "c"))
		env.Setenv("PG_DSN", pg)
		return nil
	}
	p.Condition = func(cond string) (bool, error) {
		switch cond {
		case "json":
			return true, nil
		case "postgres":
			return pg != "", nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	testscript.Run(t, p)
}
