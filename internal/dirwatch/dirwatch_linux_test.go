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

	"github.com/agentspace/agentspace/internal/dirwatch/dirwatchtest"
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

// TestALaterWatcherWatchesOnlyOnceStarted: NewLater and WatchBellLater
// hold no inotify descriptor until Start, which signals C at once (what
// was written before was not heard); writes then wake it as New's do;
// Close of one never started costs nothing, and Start after Close says
// os.ErrClosed.
func TestALaterWatcherWatchesOnlyOnceStarted(t *testing.T) {
	dir := t.TempDir()
	before := dirwatchtest.InotifyFDs(t)
	w, err := NewLater(dir, time.Second, "ws.db-wal")
	require.NoError(t, err)
	bell, err := WatchBellLater(filepath.Join(dir, "ws.db-bell"), time.Second)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "ws.db-bell"), "the bell is made at once")
	assert.Equal(t, before, dirwatchtest.InotifyFDs(t), "no descriptor before Start")

	f, err := os.OpenFile(filepath.Join(dir, "ws.db-wal"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("page"), 0)
	require.NoError(t, err)
	select {
	case <-w.C:
		t.Fatal("a watcher not started signalled")
	case <-time.After(50 * time.Millisecond):
	}

	require.NoError(t, w.Start())
	require.NoError(t, w.Start(), "Start twice")
	assert.Equal(t, before+1, dirwatchtest.InotifyFDs(t))
	select {
	case <-w.C:
	default:
		t.Fatal("Start did not signal: the write before it would go unnoticed")
	}
	_, err = f.WriteAt([]byte("page"), 4)
	require.NoError(t, err)
	select {
	case <-w.C:
	case <-time.After(10 * time.Second):
		t.Fatal("a write after Start: no wake-up")
	}
	require.NoError(t, w.Close())
	assert.Equal(t, before, dirwatchtest.InotifyFDs(t), "Close released the descriptor")

	require.NoError(t, bell.Close())
	assert.ErrorIs(t, bell.Start(), os.ErrClosed)
	assert.Equal(t, before, dirwatchtest.InotifyFDs(t))
}

// TestALaterWatcherThatCannotWatchPolls: where the watch cannot begin,
// Start says why and, with a fallback, C is signalled every fallback until
// Close, so a waiter still looks.
func TestALaterWatcherThatCannotWatchPolls(t *testing.T) {
	w, err := NewLater(filepath.Join(t.TempDir(), "gone"), 5*time.Millisecond, "ws.db-wal")
	require.NoError(t, err)
	require.Error(t, w.Start(), "the directory does not exist")
	for i := range 3 {
		select {
		case <-w.C:
		case <-time.After(10 * time.Second):
			t.Fatalf("tick %d: no signal", i)
		}
	}
	require.NoError(t, w.Close())
	for len(w.C) > 0 {
		<-w.C
	}
	select {
	case <-w.C:
		t.Fatal("a signal after Close")
	case <-time.After(30 * time.Millisecond):
	}

	_, err = New(filepath.Join(t.TempDir(), "gone"), "ws.db-wal")
	require.Error(t, err, "New has no fallback: the caller polls")
}
