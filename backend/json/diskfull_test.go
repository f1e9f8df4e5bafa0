package jsonstore

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

// failWrites makes every write of a file whose name starts with prefix fail
// half-way with ENOSPC, as on a full disk, until the returned func is called.
func failWrites(t *testing.T, prefix string) (spaceReturns func()) {
	t.Helper()
	fault := func(name string) error {
		if strings.HasPrefix(name, prefix) {
			return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
		}
		return nil
	}
	writeFault.Store(&fault)
	spaceReturns = func() { writeFault.Store(nil) }
	t.Cleanup(spaceReturns)
	return spaceReturns
}

func exportOf(t *testing.T, ws *workspace.Workspace) string {
	t.Helper()
	var buf bytes.Buffer
	_, err := ws.Export(context.Background(), &buf, workspace.ArchiveOptions{})
	require.NoError(t, err)
	return buf.String()
}

// TestWriteErrorsOfAFullDiskLeaveNoHalfWrite fails the write of the journal
// (the commit point), of a blob and of the event log (after the commit
// point) with ENOSPC. Each time the caller gets an error that says so; the
// batch is then all there (committed: replayed once space returns) or not
// at all (the journal was torn), never in part; and the store takes writes
// again once space returns, before and after reopening. Runs everywhere:
// no mount needed (workspace/diskfull_test.go fills a real tmpfs where it can).
func TestWriteErrorsOfAFullDiskLeaveNoHalfWrite(t *testing.T) {
	for _, c := range []struct {
		prefix    string
		committed bool
	}{
		{journalFile, false},
		{blobsDir + "/", true},
		{eventsFile, true},
	} {
		t.Run(c.prefix, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "ws")
			ws := engine.New(openTestStore(t, dir), workspace.Options{})
			w := workspace.Write{Actor: "alice"}
			_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("acknowledged")})
			require.NoError(t, err)
			before := exportOf(t, ws)

			spaceReturns := failWrites(t, c.prefix)
			_, err = ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "during"}},
				workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "big/b.bin", Content: bytes.Repeat([]byte("x"), 100_000)}},
			}})
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.ENOSPC, "the cause is kept")
			assert.Contains(t, err.Error(), "no space left on device", "the error says why")
			_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "still-full"})
			require.Error(t, err, "nothing is written while the disk is full")

			spaceReturns()
			_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "after"})
			require.NoError(t, err, "the store works again once space returns")

			_, nerr := ws.Notes().Get(ctx, "decision", "during")
			a, aerr := ws.Artifacts().Get(ctx, workspace.ByName("big/b.bin"))
			if c.committed {
				require.NoError(t, nerr, "a committed batch is replayed whole")
				require.NoError(t, aerr, "a committed batch is replayed whole")
				assert.Len(t, a.Content, 100_000)
			} else {
				assert.ErrorIs(t, nerr, workspace.ErrNotFound, "a torn commit leaves nothing")
				assert.ErrorIs(t, aerr, workspace.ErrNotFound, "a torn commit leaves nothing")
			}
			page, err := ws.Events().Read(ctx, workspace.EventQuery{})
			require.NoError(t, err)
			for i, e := range page.Events {
				require.Equal(t, int64(i+1), e.Seq, "no gap and no duplicate in the log")
			}
			after := exportOf(t, ws)
			for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
				if !strings.Contains(line, `"type":"end"`) && !strings.Contains(line, `"type":"log"`) {
					assert.Contains(t, after, line, "acknowledged records are kept")
				}
			}

			ws2 := engine.New(openTestStore(t, dir), workspace.Options{})
			assert.Equal(t, after, exportOf(t, ws2), "a reopened store holds the same, once")
			_, err = ws2.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("reopened-%s", c.prefix)})
			require.NoError(t, err)
		})
	}
}
