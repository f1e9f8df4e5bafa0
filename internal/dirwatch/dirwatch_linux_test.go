package dirwatch

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// watchedWAL returns a watcher of a temporary directory's ws.db-wal and
// that file, open for writing; both are closed when the test ends.
func watchedWAL(t *testing.T) (*Watcher, *os.File) {
	t.Helper()
	dir := t.TempDir()
	w, err := New(dir, "ws.db-wal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	f, err := os.OpenFile(filepath.Join(dir, "ws.db-wal"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return w, f
}

func TestAWriteToAWatchedFileWakesTheWatcher(t *testing.T) {
	w, f := watchedWAL(t)
	var err error
	for i := range 3 {
		_, err = f.WriteAt([]byte("page"), int64(i*4))
		require.NoError(t, err)
		select {
		case <-w.C:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d: no wake-up", i)
		}
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close twice")
}

func TestMatchesOnlyWatchedNamesAndOverflows(t *testing.T) {
	want := map[string]bool{"journal": true}
	assert.False(t, matches(event(unix.IN_MODIFY, "other"), want))
	assert.True(t, matches(event(unix.IN_MODIFY, "journal"), want))
	assert.True(t, matches(append(event(unix.IN_MODIFY, "other"), event(unix.IN_MODIFY, "journal")...), want))
	assert.True(t, matches(event(unix.IN_Q_OVERFLOW, ""), want), "lost events may hide a write")
	assert.True(t, matches(event(unix.IN_MODIFY, "other"), nil), "no names: every file counts")
	assert.True(t, matches(event(unix.IN_MODIFY, "journal")[:unix.SizeofInotifyEvent+2], want), "a torn read counts")
	assert.False(t, matches(nil, want))
}

// event encodes one inotify_event as the kernel does, its name NUL-padded.
func event(mask uint32, name string) []byte {
	n := len(name)
	if n > 0 {
		n = (n + 1 + 15) &^ 15
	}
	b := make([]byte, unix.SizeofInotifyEvent+n)
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], uint32(n))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

// TestASignalNotTakenHoldsTheNextOnes: while a signal waits in C, writes
// go on, and none of them is lost to a reader who comes back: it finds a
// signal, and after it has drained C a new write signals again.
func TestASignalNotTakenHoldsTheNextOnes(t *testing.T) {
	w, f := watchedWAL(t)
	var err error

	// Nobody takes C while 1,000 writes happen.
	for i := range 1000 {
		_, err = f.WriteAt([]byte("page"), int64(i*4))
		require.NoError(t, err)
	}
	select {
	case <-w.C:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal for the writes made while nobody took C")
	}
	// The watcher held at most one more; drain it, then a new write must
	// still wake the reader.
	select {
	case <-w.C:
	case <-time.After(100 * time.Millisecond):
	}
	_, err = f.WriteAt([]byte("more"), 0)
	require.NoError(t, err)
	select {
	case <-w.C:
	case <-time.After(10 * time.Second):
		t.Fatal("a write after the reader came back did not wake it")
	}
	// Close does not hang on a watcher blocked handing a signal over.
	for i := range 10 {
		_, err = f.WriteAt([]byte("page"), int64(i*4))
		require.NoError(t, err)
	}
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.Close())
}
