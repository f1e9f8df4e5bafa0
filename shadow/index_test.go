package shadow

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIndexRoundTripAndCorruption(t *testing.T) {
	m := Manifest{
		"a.txt":     {Hash: hashString("a"), Mode: 0o644, Size: 1},
		"dir/ünï":   {Hash: hashString("b"), Mode: 0o755, Size: 1 << 40},
		"link":      {Hash: hashString("../x"), Mode: fs.ModeSymlink | 0o777, Size: 4, Link: "../x"},
		"clone.bin": {Mode: 0o600, Size: 7}, // deferred: no hash yet
	}
	b, err := encodeManifest(m)
	require.NoError(t, err)
	got, err := decodeManifest(b)
	require.NoError(t, err)
	require.Equal(t, m, got)

	c := statCache{"a.txt": {Key: statKey{Ino: 9, Size: 1, Ctime: -5, Mtime: 1 << 60, Mode: 0o100644}, Entry: m["a.txt"]}, "clone.bin": {Key: statKey{Ino: 1}, Entry: m["clone.bin"]}}
	cb, err := encodeCache(c)
	require.NoError(t, err)
	gotC, err := decodeCache(cb)
	require.NoError(t, err)
	require.Equal(t, c, gotC)

	// Any flipped byte, a cut, or the other file's magic is an error.
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x40
		_, err := decodeManifest(bad)
		require.ErrorIs(t, err, errCorrupt, "byte %d", i)
	}
	_, err = decodeManifest(b[:len(b)-1])
	require.ErrorIs(t, err, errCorrupt)
	_, err = decodeCache(b)
	require.ErrorIs(t, err, errCorrupt)

	_, err = encodeManifest(Manifest{"x": {Hash: "not hex"}})
	require.Error(t, err)

	// A damaged base is an error naming it, never an empty base; a damaged
	// stat cache is an empty one.
	home := t.TempDir()
	require.NoError(t, writeBase(home, m))
	require.NoError(t, os.WriteFile(filepath.Join(home, "base.bin"), b[:10], 0o600))
	_, err = readBase(home)
	require.ErrorIs(t, err, errCorrupt)
	require.NoError(t, os.WriteFile(filepath.Join(home, "stat.bin"), cb[:10], 0o600))
	require.Nil(t, readCache(filepath.Join(home, "stat.bin")))
}

// A file changed right after a scan, to the same size, is seen by the
// next scan: the scan did not cache it, its ctime being within the racy
// margin of the scan's start (git's racily clean entries).
func TestRacyCleanFileIsRehashed(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a.txt": "one", "b.txt": "two"})
	s := e.open(t, "alice", "")
	p := filepath.Join(s.Path, "a.txt")
	for i, content := range []string{"uno", "dos", "tre"} { // the same size each time
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		d, err := e.m.Diff(e.ctx, s.ID)
		require.NoError(t, err)
		require.Len(t, d.Changes, 1, "round %d", i)
		require.Equal(t, hashString(content), d.Changes[0].New.Hash, "round %d", i)
	}
	cache := readCache(filepath.Join(filepath.Dir(s.Path), "stat.bin"))
	_, cached := cache["a.txt"]
	require.False(t, cached, "a file changed within the racy margin must not be cached")
}
