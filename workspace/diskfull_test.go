package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/workspace"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it, or skips loudly where mounting is not allowed (it needs root or
// CAP_SYS_ADMIN). With AGENTSPACE_TEST_REQUIRE_TMPFS=1 (set by .ci/run,
// which runs as root), that is a failure instead: there a skip
// would hide a regression. The json backend's injected-fault test
// (backend/json/diskfull_test.go) covers that case everywhere.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.Mkdir(dir, 0o700))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_TMPFS", "DISK-FULL TEST SKIPPED: cannot mount a tmpfs here (%v: %s); the json backend's injected write errors still run; run as root, where .ci/run's AGENTSPACE_TEST_REQUIRE_TMPFS=1 makes this a failure", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes zeros to name until the file system is full.
func fill(t *testing.T, name string) {
	t.Helper()
	f, err := os.Create(name)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	_, err = io.Copy(f, io.LimitReader(zeroReader{}, 1<<40))
	require.Error(t, err, "the small file system fills up")
	_ = f.Sync()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// storeState is what a store holds, read through the API: every note and
// artifact with content, and the whole event log.
func storeState(t *testing.T, ws *workspace.Workspace) string {
	t.Helper()
	var buf bytes.Buffer
	_, err := ws.Export(context.Background(), &buf, workspace.ArchiveOptions{})
	require.NoError(t, err)
	return buf.String()
}

// TestDiskFullFailsCleanlyAndRecovers: on a full file system a write gets a
// clear error, writes nothing half-way, and once space returns the store
// works again, before and after reopening, with everything acknowledged.
func TestDiskFullFailsCleanlyAndRecovers(t *testing.T) {
	for _, scheme := range []string{"sqlite", "json"} {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			mnt := mountTmpfs(t, 4<<20)
			dsn := scheme + ":" + filepath.Join(mnt, "ws")
			if scheme == "sqlite" {
				dsn += ".db"
			}
			ws, err := workspace.Open(ctx, dsn)
			require.NoError(t, err)
			defer func() { _ = ws.Close() }()

			w := workspace.Write{Actor: "alice"}
			for i := range 5 {
				_, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", i), Body: strings.Repeat("b", 1000)})
				require.NoError(t, err)
			}
			_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("acknowledged")})
			require.NoError(t, err)
			before := storeState(t, ws)

			ballast := filepath.Join(mnt, "ballast")
			fill(t, ballast)
			big := bytes.Repeat([]byte("x"), 1<<20)
			var failed error
			for i := 0; i < 20 && failed == nil; i++ {
				_, failed = ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{
					workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("full-%d", i)}},
					workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: fmt.Sprintf("big/%d", i), Content: big}},
				}})
			}
			require.Error(t, failed, "a write to a full disk fails")
			t.Logf("the full disk's error: %v", failed)
			msg := strings.ToLower(failed.Error())
			assert.True(t, strings.Contains(msg, "no space") || strings.Contains(msg, "full"),
				"the error says the disk is full: %v", failed)

			require.NoError(t, os.Remove(ballast), "space returns")
			_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "after"})
			require.NoError(t, err, "the store works again once space returns")
			after := storeState(t, ws)
			assertAllOrNothing(t, ws, before, after)

			require.NoError(t, ws.Close())
			ws2, err := workspace.Open(ctx, dsn)
			require.NoError(t, err, "the store reopens")
			defer func() { _ = ws2.Close() }()
			assert.Equal(t, after, storeState(t, ws2), "the reopened store holds what was acknowledged, once")
			a, err := ws2.Artifacts().Get(ctx, workspace.ByName("plans/a.md"))
			require.NoError(t, err)
			assert.Equal(t, "acknowledged", string(a.Content))
		})
	}
}

// assertAllOrNothing: every batch written while the disk was full is either
// all there (its note and its whole artifact) or not at all, and the event
// log has no gap.
func assertAllOrNothing(t *testing.T, ws *workspace.Workspace, before, after string) {
	t.Helper()
	ctx := context.Background()
	for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
		if strings.Contains(line, `"type":"end"`) || strings.Contains(line, `"type":"log"`) {
			continue
		}
		assert.Contains(t, after, line, "an acknowledged record is still there")
	}
	for i := range 20 {
		_, nerr := ws.Notes().Get(ctx, "decision", fmt.Sprintf("full-%d", i))
		a, aerr := ws.Artifacts().Get(ctx, workspace.ByName(fmt.Sprintf("big/%d", i)))
		if nerr == nil {
			require.NoError(t, aerr, "batch %d: the note is there, so is the artifact", i)
			assert.Equal(t, 1<<20, len(a.Content), "batch %d: the whole content", i)
			continue
		}
		assert.True(t, errors.Is(nerr, workspace.ErrNotFound), "batch %d: %v", i, nerr)
		assert.ErrorIs(t, aerr, workspace.ErrNotFound, "batch %d: the note is not there, nor is the artifact", i)
	}
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 10000})
	require.NoError(t, err)
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Seq, "no gap in the log")
	}
}
