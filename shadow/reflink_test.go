package shadow

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/testskip"
)

// reflinkEnvVar names a directory on a file system with reflinks (XFS
// made with reflink=1, btrfs): set, TestOpenReflink runs there.
const reflinkEnvVar = "AGENTSPACE_TEST_REFLINK_DIR"

// TestOpenReflink opens a shadow on a reflink file system: files are
// cloned, their hashes deferred to the snapshot, an in-place edit in the
// shadow does not reach the real file, and diff, promote and rebase see
// exactly the changes made.
func TestOpenReflink(t *testing.T) {
	dir := os.Getenv(reflinkEnvVar)
	if dir == "" {
		// .ci/run makes one and sets AGENTSPACE_TEST_REQUIRE_REFLINK=1, so
		// there this is a failure, not a skip.
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_REFLINK", "%s is not set: no reflink file system to test on", reflinkEnvVar)
	}
	ok, err := ReflinksAvailable(dir)
	require.NoError(t, err)
	require.True(t, ok, "%s=%s has no reflinks", reflinkEnvVar, dir)
	e := newEnvIn(t, tempIn(t, dir), Options{})
	write(t, e.dir, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n", "c.txt": "gamma\n", "d.txt": "delta\n", "e.txt": "eps\n", "empty": ""})
	require.NoError(t, os.Symlink("a.txt", filepath.Join(e.dir, "l")))
	before := tree(t, e.dir)

	s := e.open(t, "alice", "")
	require.True(t, s.Reflinked)
	home := filepath.Dir(s.Path)
	base, err := readBase(home)
	require.NoError(t, err)
	for p, en := range base {
		require.Equal(t, p == "l", en.Hash != "", "%s: a clone's hash is deferred, a link's is not", p)
	}
	require.Equal(t, before, tree(t, s.Path))

	// An in-place write into the clone leaves the real file as it was.
	f, err := os.OpenFile(filepath.Join(s.Path, "a.txt"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("ALPHA"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, before, tree(t, e.dir))

	require.NoError(t, os.Remove(filepath.Join(s.Path, "sub/b.txt")))
	require.NoError(t, os.Rename(filepath.Join(s.Path, "c.txt"), filepath.Join(s.Path, "c2.txt")))
	require.NoError(t, os.WriteFile(filepath.Join(s.Path, "d.txt"), []byte("delta\n"), 0o644)) // rewritten, same bytes
	write(t, s.Path, map[string]string{"new.txt": "new\n"})

	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	got := map[string]ChangeKind{}
	for _, c := range d.Changes {
		got[c.From+">"+c.Path] = c.Kind
		for _, en := range []*Entry{c.Old, c.New} {
			require.True(t, en == nil || en.Hash != "", "a diff carries no deferred hash")
		}
	}
	require.Equal(t, map[string]ChangeKind{">a.txt": Modified, ">sub/b.txt": Deleted, "c.txt>c2.txt": Renamed, ">new.txt": Added}, got)
	for _, c := range d.Changes {
		if c.Kind == Modified {
			require.Equal(t, hashString("alpha\n"), c.Old.Hash)
			require.Equal(t, hashString("ALPHA\n"), c.New.Hash)
		}
	}

	// The real tree moves under e.txt; rebase takes it (its base is hashed
	// from the snapshot to see that the shadow left it alone).
	write(t, e.dir, map[string]string{"e.txt": "EPS\n"})
	r, err := e.m.Rebase(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, []string{"e.txt"}, r.Refreshed)
	require.Empty(t, r.Conflicts)

	e.validPromote(t, s)
	require.Equal(t, tree(t, s.Path), tree(t, e.dir))
	d, err = e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, d.Changes)
}
