package jsonstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

const walChildEnv = "JSONSTORE_WAL_CHILD_DIR"

// walCommits is how many commits the idle writer makes: few enough that
// none of them is checkpointed.
const walCommits = 9

// walChild commits walCommits writes through one handle, acknowledging each
// as crashChild does, then prints IDLE and waits to be killed.
func walChild(dir string) int {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "json:"+dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	fmt.Println("READY")
	w := workspace.Write{Actor: "wal"}
	for j := range walCommits {
		switch j % 3 {
		case 0:
			a, err := ws.Artifacts().Update(ctx, w, workspace.ByName("docs/a.md"), workspace.ArtifactChange{Content: []byte(fmt.Sprintf("update %d\n", j))})
			if err != nil {
				fmt.Fprintln(os.Stderr, "update:", err)
				return 3
			}
			fmt.Printf("ART %s %d %s\n", a.Name, a.Version, a.SHA256)
		case 1:
			n, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", j), Body: "b"})
			if err != nil {
				fmt.Fprintln(os.Stderr, "note:", err)
				return 3
			}
			fmt.Printf("NOTE %s %d\n", n.Key, n.Version)
		case 2:
			a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: fmt.Sprintf("docs/new%d.md", j), Content: []byte(fmt.Sprintf("new %d\n", j))})
			if err != nil {
				fmt.Fprintln(os.Stderr, "create:", err)
				return 3
			}
			fmt.Printf("ART %s %d %s\n", a.Name, a.Version, a.SHA256)
		}
	}
	fmt.Println("IDLE")
	time.Sleep(time.Hour)
	return 0
}

// copyDir copies the tree src into dst (created).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	}))
}

// TestWriterKilledBetweenCommitsIsReplayed kills a writer that is idle
// after several commits, none of them checkpointed: the journal holds them
// all. The next open replays them, both as the writer left the tree and as
// a power cut would (every file as it was at the last checkpoint, only the
// fsynced journal newer), and finds every acknowledged write.
func TestWriterKilledBetweenCommitsIsReplayed(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	ws, err := workspace.Open(ctx, "json:"+dir)
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "setup"}, workspace.NewArtifact{Name: "docs/a.md", Content: []byte("v1\n")})
	require.NoError(t, err)
	require.NoError(t, ws.Close()) // checkpoints: the journal is empty
	journal := filepath.Join(dir, ".journal")
	fi, err := os.Stat(journal)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "Close checkpoints")
	checkpointed := filepath.Join(base, "checkpointed")
	copyDir(t, dir, checkpointed)

	got := &acks{}
	idle := make(chan struct{})
	cmd, ready, done, stderr := startChild(t, walChildEnv, dir, got)
	<-ready
	go func() {
		for {
			got.mu.Lock()
			n := len(got.lines)
			last := n > 0 && got.lines[n-1] == "IDLE"
			got.mu.Unlock()
			if last {
				close(idle)
				return
			}
			select {
			case <-done:
				close(idle)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	<-idle
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-done
	_ = cmd.Wait()
	lines := got.lines
	require.Equal(t, "IDLE", lines[len(lines)-1], "writer stderr: %s", stderr)
	lines = lines[:len(lines)-1]
	require.Len(t, lines, walCommits)

	data, err := os.ReadFile(journal)
	require.NoError(t, err)
	assert.Equal(t, walCommits, bytes.Count(data, []byte("agentspace-applied\n")), "every commit is still in the journal, marked applied")
	assert.Equal(t, walCommits, bytes.Count(data, []byte("agentspace-journal 1 ")))

	t.Run("as the writer left it", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "ws")
		copyDir(t, dir, d)
		checkAfterCrashes(t, d, lines)
	})
	t.Run("files lost as in a power cut", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "ws")
		copyDir(t, checkpointed, d)
		require.NoError(t, os.WriteFile(filepath.Join(d, ".journal"), data, 0o600))
		_, err := os.Stat(filepath.Join(d, "artifacts", "docs", "new2.md"))
		require.ErrorIs(t, err, fs.ErrNotExist, "the checkpointed tree predates the writer's commits")
		checkAfterCrashes(t, d, lines)
		fi, err := os.Stat(filepath.Join(d, ".journal"))
		require.NoError(t, err)
		assert.Zero(t, fi.Size(), "replayed and checkpointed")
	})
}
