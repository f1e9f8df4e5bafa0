package jsonstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// A symbolic link planted in the tree, in place of a directory or a file
// the store writes, makes every write through it fail with a typed
// ErrInvalid that names the path inside the store only: nothing is written
// through the link, outside or onto another file of the store, and nothing
// is committed (the log's head does not move). Each case plants its link
// while a handle is open, and again before a fresh open.
func TestWritesThroughAPlantedSymlinkAreRefused(t *testing.T) {
	ctx := context.Background()
	// A directory is moved out of the store and the link points to it
	// there, as one who wants the store's writes to land elsewhere would
	// do; a file is replaced by a link to a file outside, or to another
	// file of the store.
	type planted struct {
		name  string
		link  string // replaced by a link, relative to the store
		file  func(dir, outside string) string
		write func(ws *workspace.Workspace) error
	}
	toOutsideFile := func(dir, outside string) string { return filepath.Join(outside, "file") }
	createDoc := func(ws *workspace.Workspace) error {
		_, err := ws.Artifacts().Create(ctx, writer, workspace.NewArtifact{Name: "docs/b.md", Content: []byte("secret")})
		return err
	}
	updateDoc := func(ws *workspace.Workspace) error {
		_, err := ws.Artifacts().Update(ctx, writer, workspace.ByName("docs/a.md"), workspace.ArtifactChange{Content: []byte("secret")})
		return err
	}
	putNote := func(ws *workspace.Workspace) error {
		_, err := ws.Notes().Put(ctx, writer, workspace.NotePut{Kind: "decision", Key: "k", Body: "secret"})
		return err
	}
	cases := []planted{
		{"the artifacts directory, on create", "artifacts", nil, createDoc},
		{"an artifact name's directory, on create", "artifacts/docs", nil, createDoc},
		{"an artifact name's directory, on update", "artifacts/docs", nil, updateDoc},
		{"an artifact's readable copy, on update", "artifacts/docs/a.md", toOutsideFile, updateDoc},
		{"a new artifact's readable copy, on create", "artifacts/docs/b.md", toOutsideFile, createDoc},
		{"an artifact's blob directory, on update", "blobs", nil, updateDoc},
		{"the versions directory, on update", "meta/versions", nil, updateDoc},
		{"a note kind's directory", "notes/decision", nil, putNote},
		{"a note's file, onto the event log", "notes/decision/k.json",
			func(dir, _ string) string { return filepath.Join(dir, "events.ndjson") }, putNote},
		{"the tasks directory", "tasks", nil, func(ws *workspace.Workspace) error {
			_, err := ws.Tasks().Create(ctx, writer, workspace.NewTask{Title: "t2"})
			return err
		}},
		{"the leases directory", "leases", nil, func(ws *workspace.Workspace) error {
			_, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:x", Owner: "tester", TTL: time.Minute})
			return err
		}},
	}
	for _, c := range cases {
		for _, reopen := range []bool{false, true} {
			name := c.name
			if reopen {
				name += ", planted before open"
			}
			t.Run(name, func(t *testing.T) {
				base := t.TempDir()
				dir, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
				require.NoError(t, os.Mkdir(outside, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(outside, "file"), []byte("outside\n"), 0o600))
				ws, err := workspace.Open(ctx, "json:"+dir)
				require.NoError(t, err)
				first := ws
				t.Cleanup(func() { _ = first.Close() })
				create(t, ws, "docs/a.md", "v1")
				_, err = ws.Notes().Put(ctx, writer, workspace.NotePut{Kind: "decision", Key: "k", Body: "b"})
				require.NoError(t, err)
				_, err = ws.Tasks().Create(ctx, writer, workspace.NewTask{Title: "t"})
				require.NoError(t, err)
				_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:y", Owner: "tester", TTL: time.Minute})
				require.NoError(t, err)
				head, err := ws.Events().Head(ctx)
				require.NoError(t, err)
				logBefore, err := os.ReadFile(filepath.Join(dir, "events.ndjson"))
				require.NoError(t, err)

				link := filepath.Join(dir, filepath.FromSlash(c.link))
				moved := filepath.Join(outside, "moved")
				if c.file == nil {
					require.NoError(t, os.Rename(link, moved))
					require.NoError(t, os.Symlink(moved, link))
				} else {
					require.NoError(t, os.RemoveAll(link))
					require.NoError(t, os.Symlink(c.file(dir, outside), link))
				}
				outsideBefore := treeOf(t, outside)
				if reopen {
					require.NoError(t, ws.Close())
					again, err := workspace.Open(ctx, "json:"+dir)
					if err != nil {
						// A top-level directory that is a link stops the open
						// itself, before any write, with the same refusal.
						require.ErrorIs(t, err, workspace.ErrInvalid)
						assert.Contains(t, err.Error(), "symbolic link")
						assert.Equal(t, outsideBefore, treeOf(t, outside))
						return
					}
					t.Cleanup(func() { _ = again.Close() })
					ws = again
				}

				err = c.write(ws)
				require.ErrorIs(t, err, workspace.ErrInvalid)
				var ie *workspace.InvalidError
				require.ErrorAs(t, err, &ie)
				assert.Contains(t, ie.Reason, "symbolic link")
				assert.Contains(t, ie.Reason, firstSegment(c.link), "names the path inside the store")
				assert.NotContains(t, err.Error(), base, "no path outside the store")

				assert.Equal(t, outsideBefore, treeOf(t, outside), "nothing was written through the link")
				after, err := ws.Events().Head(ctx)
				require.NoError(t, err)
				assert.Equal(t, head, after, "nothing was committed")
				logAfter, err := os.ReadFile(filepath.Join(dir, "events.ndjson"))
				require.NoError(t, err)
				assert.Equal(t, logBefore, logAfter)

				// With the link gone (the directory back), the same write
				// goes through.
				require.NoError(t, os.Remove(link))
				if c.file == nil {
					require.NoError(t, os.Rename(moved, link))
				}
				require.NoError(t, c.write(ws))
			})
		}
	}
}

func firstSegment(p string) string {
	for i := range len(p) {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return p
}

// treeOf maps every file under root to its content.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}
