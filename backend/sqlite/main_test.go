package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Child processes of the multi-process tests re-execute this test binary
// with childRoleEnv set; TestMain then plays that part and exits.
const (
	childRoleEnv = "AGENTSPACE_SQLITE_TEST_CHILD"
	childPathEnv = "AGENTSPACE_SQLITE_TEST_PATH"
	childGoEnv   = "AGENTSPACE_SQLITE_TEST_GO"
	childNameEnv = "AGENTSPACE_SQLITE_TEST_NAME"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild waits for the go-file (so that every child starts at once),
// brings the store's schema up (by migrating or by opening), and writes one
// artifact to prove the store is usable.
func runChild(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path, goFile := os.Getenv(childPathEnv), os.Getenv(childGoEnv)
	for {
		if _, err := os.Stat(goFile); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	dsn := "sqlite:" + path
	switch role {
	case "write":
		return writeNotes(ctx, dsn, os.Getenv(childNameEnv))
	case "write-until-killed":
		return writeUntilKilled(ctx, dsn)
	case "migrate-then-hang":
		return migrateThenHang(ctx, dsn, goFile)
	}
	if role == "migrate" {
		m, err := workspace.OpenMigrator(ctx, dsn)
		if err != nil {
			return err
		}
		if err := m.Up(ctx); err != nil {
			_ = m.Close()
			return err
		}
		if err := m.Close(); err != nil {
			return err
		}
	}
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ws.Close()
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "child"},
		workspace.NewArtifact{Name: "children/" + os.Getenv(childNameEnv), Content: []byte(role)})
	return err
}

// childWrites is how many notes a "write" child puts, one transaction each.
const childWrites = 40

func writeNotes(ctx context.Context, dsn, name string) error {
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ws.Close()
	for i := range childWrites {
		if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "child-" + name},
			workspace.NotePut{Kind: "friction", Key: fmt.Sprintf("%s-%d", name, i), Body: "x"}); err != nil {
			return err
		}
	}
	return nil
}

// writeUntilKilled puts notes k0, k1, ... and reports each acknowledged
// one on stdout, until the parent kills the process.
func writeUntilKilled(ctx context.Context, dsn string) error {
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ws.Close()
	for i := 0; ; i++ {
		if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "doomed"},
			workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "x"}); err != nil {
			return err
		}
		fmt.Println(i)
	}
}
