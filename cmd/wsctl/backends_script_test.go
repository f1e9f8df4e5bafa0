package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace/driver"
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

// everyBackendScripts are the scripts of testdata/script whose commands
// reach what differs between backends: a DSN that names no store, the
// schema's migrations, backups and archives, retention, the status and
// completion read from the store, and the waits of messages and pauses
// that one process ends with a write of another's. The others (agent, artifact, events,
// lock, note, policy, recipe, task) test the CLI over the one API every
// backend serves alike, which the conformance suite proves on each: they
// run on SQLite, and through a server (TestScriptsThroughAServer).
var everyBackendScripts = []string{"archive", "completion", "migrate", "noworkspace", "retention", "status", "message", "pause"}

// scriptsDir copies the named scripts of testdata/script into a directory
// of their own, for a run of only those.
func scriptsDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata/script", name+".txtar"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".txtar"), b, 0o600))
	}
	return dir
}

// TestScriptsOnEveryBackend runs testdata/script/*.txtar against fresh
// SQLite stores, and everyBackendScripts against fresh stores of the
// other backends: the same commands, outputs and exit codes everywhere.
// The backends run at once, and beside the other script tests: a script
// mostly waits for the wsctl it runs, and the scripts of one backend
// alone leave the test's slots idle while its longest script ends.
func TestScriptsOnEveryBackend(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		requireScheme(t, "sqlite")
		testscript.Run(t, scriptParams("testdata/script", fileStores["sqlite"]))
	})
	dir := scriptsDir(t, everyBackendScripts...)
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		requireScheme(t, "json")
		testscript.Run(t, scriptParams(dir, fileStores["json"]))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		requireScheme(t, "postgres")
		pgtest.ServerDSN(t) // skips with one loud line, or fails under AGENTSPACE_TEST_REQUIRE_POSTGRES=1
		testscript.Run(t, scriptParams(dir, func(string, string) string { return pgtest.NewDSN(t) }))
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
