package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentspace/agentspace/internal/wsctltest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"wsctl": func() {
			os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
		},
	})
}

// scriptCmds are the commands our scripts add to testscript's:
//
//	exitcode N PROG ARGS...  run PROG and require exit code N (stdout and stderr are kept for checks)
//	capture VAR              set $VAR to the last command's stdout, trimmed
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: exitcode N PROG ARGS...")
		}
		want, err := strconv.Atoi(args[0])
		if err != nil {
			ts.Fatalf("exitcode: %q is not a number", args[0])
		}
		got := 0
		if err := ts.Exec(args[1], args[2:]...); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				ts.Fatalf("exitcode: %v", err)
			}
			got = ee.ExitCode()
		}
		if got != want {
			ts.Fatalf("exit code %d, want %d", got, want)
		}
	},
	"capture": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: capture VAR")
		}
		ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
	},
}

// scriptParams runs the scripts with AGENTSPACE_DSN, WS2_DSN and WS3_DSN
// naming three fresh stores, made by dsn from $WORK and a name.
//
// The scripts' wsctl is the real program, built once (internal/wsctltest,
// which says when it has the race detector) and put first on their PATH:
// the scripts run it some twelve hundred times, and each start of this
// test binary as wsctl cost about a third more CPU than the program's own
// (measured 0.15 s against 0.115 s, both under -race).
func scriptParams(dir string, dsn func(work, name string) string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		Cmds:                scriptCmds,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			bin, err := wsctltest.Path()
			if err != nil {
				return err
			}
			env.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("AGENTSPACE_DSN", dsn(env.WorkDir, "ws"))
			env.Setenv("WS2_DSN", dsn(env.WorkDir, "ws2"))
			env.Setenv("WS3_DSN", dsn(env.WorkDir, "ws3"))
			env.Setenv("AGENTSPACE_ACTOR", "")
			env.Setenv("AGENTSPACE_ENV", "")
			// A race-enabled binary sleeps 1s at exit by default: every
			// wsctl call would, and the scripts make hundreds.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return nil
		},
	}
}

// TestScriptsWithoutBackend checks what needs no store: usage errors and configuration.
func TestScriptsWithoutBackend(t *testing.T) {
	t.Parallel()
	testscript.Run(t, scriptParams("testdata/noback", func(work, name string) string { return "" }))
}
