package dirwatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bell opens a bell and a watcher of it in a temporary directory; both are
// closed when the test ends.
func bell(t *testing.T) (string, *Bell, *Watcher) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ws.db-bell")
	b, err := OpenBell(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	w, err := WatchBell(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return path, b, w
}

func heard(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no wake-up", what)
	}
}

func quiet(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C:
		t.Fatalf("%s: a wake-up", what)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestARingWakesTheBellsWatcher(t *testing.T) {
	path, b, w := bell(t)
	for i := range 3 {
		require.NoError(t, b.Ring())
		heard(t, w, "ring")
		_ = i
	}
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Equal(t, int64(1), info.Size(), "a ring overwrites one byte")
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Ring(), os.ErrClosed)
	require.NoError(t, b.Close(), "Close twice")
}

// Writes to the other files of the bell's directory (the database and its
// WAL) are no news: only the bell is watched.
func TestWritesBesideTheBellWakeNoOne(t *testing.T) {
	path, _, w := bell(t)
	wal, err := os.OpenFile(filepath.Join(filepath.Dir(path), "ws.db-wal"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer wal.Close()
	for i := range 20 {
		_, err := wal.WriteAt([]byte("frame"), int64(i*5))
		require.NoError(t, err)
	}
	quiet(t, w, "WAL writes")
}

// A bell removed while it is held is replaced: the watcher follows the
// path to the new file, and a ring reaches it once the ringer notices.
func TestARemovedBellIsReplacedOnBothSides(t *testing.T) {
	path, b, w := bell(t)
	require.NoError(t, os.Remove(path))
	heard(t, w, "the removal") // the link count changed: anything may have
	// The watcher made the file again and watches it.
	_, err := os.Stat(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	heard(t, w, "a write to the new file")
	// The ringer still holds the old file, until its next check.
	b.mu.Lock()
	b.checked = time.Time{}
	b.mu.Unlock()
	require.NoError(t, b.Ring())
	heard(t, w, "a ring after the ringer's check")
	held, err := b.f.Stat()
	require.NoError(t, err)
	there, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(held, there), "the ringer holds the file at the path again")
}

func TestANilBellRingsNothing(t *testing.T) {
	var b *Bell
	require.NoError(t, b.Ring())
	require.NoError(t, b.Close())
}
