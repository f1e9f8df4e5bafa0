package shadow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func TestOpenCopiesTheTreeWithoutSharingFiles(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a.txt": "a\n", "src/b.go": "package b\n"})
	require.NoError(t, os.Symlink("a.txt", filepath.Join(e.dir, "link")))
	s := e.open(t, "alice", "")
	assert.Equal(t, tree(t, e.dir), tree(t, s.Path))

	// An in-place edit in the shadow never reaches the real file.
	f, err := os.OpenFile(filepath.Join(s.Path, "a.txt"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("X"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := os.ReadFile(filepath.Join(e.dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a\n", string(b))
	var rs, ss syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(e.dir, "src/b.go"), &rs))
	require.NoError(t, syscall.Stat(filepath.Join(s.Path, "src/b.go"), &ss))
	assert.NotEqual(t, rs.Ino, ss.Ino, "a hard link would write through")

	// Several shadows of one directory; each is found by id or by path.
	s2 := e.open(t, "bob", "")
	assert.NotEqual(t, s.Path, s2.Path)
	got, err := e.m.Get(e.ctx, filepath.Join(s2.Path, "src"))
	require.NoError(t, err)
	assert.Equal(t, s2.ID, got.ID)
	list, err := e.m.List(e.ctx)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	assert.Equal(t, []string{EventOpened + " " + s.ID, EventOpened + " " + s2.ID}, messages(t, e.ws, NoteKind))
}

func TestOpenRefusesBadInput(t *testing.T) {
	e := newEnv(t, Options{})
	_, err := e.m.Open(e.ctx, OpenRequest{Dir: e.dir})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "no actor")
	_, err = e.m.Open(e.ctx, OpenRequest{Dir: filepath.Join(e.dir, "nope"), Actor: "a"})
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = e.m.Open(e.ctx, OpenRequest{Dir: filepath.Dir(e.root), Actor: "a"})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a directory holding the shadows' root")
	_, err = e.m.Open(e.ctx, OpenRequest{Dir: e.dir, Actor: "a", Task: "01900000-0000-7000-8000-000000000000"})
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	list, err := e.m.List(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestDiffListsEveryKindOfChange(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"keep": "k\n", "mod": "1\n2\n3\n", "gone": "g\n", "old/name": "moved content\n"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"mod": "1\ntwo\n3\n", "new/file": "fresh\n", "new/name": "moved content\n"})
	require.NoError(t, os.Remove(filepath.Join(s.Path, "gone")))
	require.NoError(t, os.RemoveAll(filepath.Join(s.Path, "old")))
	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	var got []string
	for _, c := range d.Changes {
		got = append(got, string(c.Kind)+" "+c.From+">"+c.Path)
	}
	assert.Equal(t, []string{"deleted >gone", "modified >mod", "added >new/file", "renamed old/name>new/name"}, got)
	u, err := e.m.Unified(e.ctx, s.ID, d)
	require.NoError(t, err)
	assert.Contains(t, u, "--- a/mod\n+++ b/mod\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n")
	assert.Contains(t, u, "--- /dev/null\n+++ b/new/file\n")
	assert.Contains(t, u, "--- a/gone\n+++ /dev/null\n")
	assert.Contains(t, u, "rename from old/name\nrename to new/name\n")

	// The hash names the content: another edit changes it.
	write(t, s.Path, map[string]string{"mod": "1\nTWO\n3\n"})
	d2, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	assert.NotEqual(t, d.Hash, d2.Hash)
}

func TestPromoteNeedsAPassingValidationOfThisDiff(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a": "a\n", "b": "b\n", "sub/c": "c\n"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"a": "A\n", "deep/er/d": "d\n"})
	require.NoError(t, os.Remove(filepath.Join(s.Path, "b")))
	require.NoError(t, os.Chmod(filepath.Join(s.Path, "sub/c"), 0o755))
	before := tree(t, e.dir)

	_, err := e.m.Promote(e.ctx, s.ID, "")
	assert.ErrorIs(t, err, ErrNotValidated, "never validated")
	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.True(t, v.Passed)
	write(t, s.Path, map[string]string{"a": "A changed after validation\n"})
	_, err = e.m.Promote(e.ctx, s.ID, "")
	assert.ErrorIs(t, err, ErrNotValidated, "the diff moved on")
	assert.Equal(t, before, tree(t, e.dir), "a refused promotion writes nothing")

	v, err = e.m.Validate(e.ctx, s.ID, "bob")
	require.NoError(t, err)
	require.True(t, v.Passed)
	_, err = e.m.Promote(e.ctx, s.ID, "alice")
	assert.ErrorIs(t, err, ErrNotValidated, "bob's validation does not vouch for alice")

	p := e.validPromote(t, s)
	assert.Equal(t, tree(t, s.Path), tree(t, e.dir))
	assert.Len(t, p.Diff.Changes, 4)
	art, err := e.ws.Artifacts().Get(e.ctx, workspace.ByName(p.Artifact))
	require.NoError(t, err)
	assert.Equal(t, DiffArtifactKind, art.Kind)
	assert.NotContains(t, string(art.Content), "A changed after validation", "the artifact keeps no copy of the files")
	assert.Regexp(t, `(?m)^modified \S+ mode 644 -> 755`, string(art.Content))
	assert.Equal(t, s.ID, art.Labels["shadow"])

	// The base moved: nothing left to promote, and the steps are in the log.
	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	assert.Empty(t, d.Changes)
	var steps []string
	for _, m := range messages(t, e.ws, NoteKind) {
		steps = append(steps, strings.Fields(m)[0])
	}
	assert.Equal(t, []string{EventOpened, EventValidated, EventValidated, EventValidated, EventPromoted}, steps)
	leftovers, err := filepath.Glob(filepath.Join(e.dir, "*", ".shadow-*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers)
}

func TestSecondPromotionOfTheSameFileConflictsDisjointBothPromote(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"shared": "s\n", "x": "x\n", "y": "y\n"})
	alice, bob, carol := e.open(t, "alice", ""), e.open(t, "bob", ""), e.open(t, "carol", "")
	write(t, alice.Path, map[string]string{"shared": "alice\n", "x": "ax\n"})
	write(t, bob.Path, map[string]string{"shared": "bob\n", "y": "by\n"})
	write(t, carol.Path, map[string]string{"new-by-carol": "c\n"})
	e.validPromote(t, alice)
	e.validPromote(t, carol)

	v, err := e.m.Validate(e.ctx, bob.ID, "")
	require.NoError(t, err)
	require.True(t, v.Passed)
	before := tree(t, e.dir)
	_, err = e.m.Promote(e.ctx, bob.ID, "")
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, workspace.ErrConflict)
	assert.Equal(t, []string{"shared"}, ce.Paths)
	assert.Equal(t, before, tree(t, e.dir))
	assert.Contains(t, messages(t, e.ws, NoteKind), EventConflicted+" "+bob.ID+": shared")

	// Rebase takes carol's and alice's other files into bob's shadow and
	// leaves the file both changed; once bob gives his up, he promotes.
	r, err := e.m.Rebase(e.ctx, bob.ID, "")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"x", "new-by-carol"}, r.Refreshed)
	assert.Equal(t, []string{"shared"}, r.Conflicts)
	write(t, bob.Path, map[string]string{"shared": "alice\n"})
	r, err = e.m.Rebase(e.ctx, bob.ID, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"shared"}, r.Refreshed, "the same change on both sides")
	assert.Empty(t, r.Conflicts)
	e.validPromote(t, bob)
	want := map[string]string{"shared": "644:alice\n", "x": "644:ax\n", "y": "644:by\n", "new-by-carol": "644:c\n"}
	assert.Equal(t, want, tree(t, e.dir))
}

func TestDiscardDropsTheShadow(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a": "a\n"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"a": "changed\n"})
	out, err := e.m.Discard(e.ctx, s.ID, "", false)
	require.NoError(t, err)
	assert.True(t, out.Removed)
	assert.NoDirExists(t, s.Path)
	assert.Equal(t, map[string]string{"a": "644:a\n"}, tree(t, e.dir))
	_, err = e.m.Get(e.ctx, s.ID)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	n, err := e.ws.Notes().Get(e.ctx, NoteKind, s.ID)
	require.NoError(t, err)
	assert.Contains(t, n.Body, `"state":"discarded"`)
}

func TestRecoverOfAnUntouchedDirectoryIsANoOp(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a": "a\n"})
	require.NoError(t, e.m.Recover(e.ctx, e.dir))
	assert.Equal(t, map[string]string{"a": "644:a\n"}, tree(t, e.dir))
}

func TestReflinkProbeAnswers(t *testing.T) {
	ok, err := ReflinksAvailable(t.TempDir())
	require.NoError(t, err)
	t.Logf("reflinks on the test directory's file system: %v", ok)
	_, err = ReflinksAvailable(filepath.Join(t.TempDir(), "missing"))
	assert.True(t, errors.Is(err, os.ErrNotExist))
}
