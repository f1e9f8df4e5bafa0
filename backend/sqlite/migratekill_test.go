package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// childStepEnv names the step a "migrate-then-hang" child stops in.
const childStepEnv = "AGENTSPACE_SQLITE_TEST_STEP"

// migrateThenHang migrates the store up and, in step childStepEnv's
// transaction, once its SQL and its version are written and before its
// COMMIT, creates the go-file's ".at" file and waits to be killed.
func migrateThenHang(ctx context.Context, dsn, goFile string) error {
	at, err := strconv.ParseUint(os.Getenv(childStepEnv), 10, 32)
	if err != nil {
		return err
	}
	sqlite.SetMigrateHook(func(ctx context.Context, v uint, up bool) error {
		if v != uint(at) || !up {
			return nil
		}
		if err := os.WriteFile(goFile+".at", nil, 0o600); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	m, err := workspace.OpenMigrator(ctx, dsn)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up(ctx)
}

// TestAMigrationKilledInAnyStepLeavesAStoreThatOpens writes a store at
// the latest schema, takes it down to the release before the event chain,
// and migrates it up again in a child process killed (SIGKILL) inside
// each step in turn, before that step's COMMIT. Each time the store is at
// the version before the step, not dirty; it opens (migrating the rest
// with ws_automigrate), holds everything written before, and verifies.
func TestAMigrationKilledInAnyStepLeavesAStoreThatOpens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const from = 4 // the release before the event chain
	latest := sqlite.LatestVersion()
	for step := uint(from + 1); step <= latest; step++ {
		t.Run(fmt.Sprint("step ", step), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ws.db")
			dsn := "sqlite:" + path
			ws, err := workspace.Open(ctx, dsn)
			require.NoError(t, err)
			for i := range 20 {
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "x"})
				require.NoError(t, err)
			}
			require.NoError(t, ws.Close())
			m, err := workspace.OpenMigrator(ctx, dsn)
			require.NoError(t, err)
			require.NoError(t, m.Goto(ctx, from))
			require.NoError(t, m.Close())

			goFile := filepath.Join(dir, "go")
			require.NoError(t, os.WriteFile(goFile, nil, 0o600))
			cmd := exec.Command(os.Args[0], "-test.run=^$") // #nosec G204 -- this test binary, as a child
			cmd.Env = append(os.Environ(), childRoleEnv+"=migrate-then-hang", childPathEnv+"="+path,
				childGoEnv+"="+goFile, childStepEnv+"="+fmt.Sprint(step))
			out, err := os.CreateTemp(dir, "child")
			require.NoError(t, err)
			cmd.Stdout, cmd.Stderr = out, out
			require.NoError(t, cmd.Start())
			for {
				if _, err := os.Stat(goFile + ".at"); err == nil {
					break
				}
				if ctx.Err() != nil {
					b, _ := os.ReadFile(out.Name())
					t.Fatalf("the child never reached step %d: %s", step, b)
				}
				time.Sleep(5 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()

			m, err = workspace.OpenMigrator(ctx, dsn)
			require.NoError(t, err)
			v, dirty, err := m.Version(ctx)
			require.NoError(t, m.Close())
			require.NoError(t, err)
			assert.Equal(t, step-1, v, "the killed step rolled back, its version with it")
			assert.False(t, dirty, "no migrate force is needed")

			_, err = workspace.Open(ctx, dsn)
			var se *workspace.SchemaError
			require.ErrorAs(t, err, &se, "an older schema is not migrated without ws_automigrate")
			assert.False(t, se.Dirty)
			ws, err = workspace.Open(ctx, dsn+"?ws_automigrate=true")
			require.NoError(t, err)
			defer ws.Close()
			for i := range 20 {
				n, err := ws.Notes().Get(ctx, "decision", fmt.Sprint("k", i))
				require.NoError(t, err)
				assert.Equal(t, "x", n.Body)
			}
			rep, err := ws.Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "%+v", rep)
		})
	}
}
