package dirwatch

import (
	"os"
	"sync"
	"time"
)

// A Bell is a small file whose only content is news. A process that
// commits to a store shared through the file system rings the store's
// bell once the commit is readable, and the processes that follow the
// store watch the bell alone (WatchBell), not the directory.
//
// Watching the directory made every write of the store's own files an
// event: SQLite writes a WAL frame with two pwrites, so a commit of a
// few pages queued a dozen inotify events, each allocated, merged and
// read by every watching process, the writer's own included, and the
// first came before the commit could be read. A bell is one event per
// commit, after it: on SQLite through one server, watching the WAL cost
// the server about a third of its CPU per write (issue #40).
//
// The bell's content means nothing: Ring overwrites its one byte. A bell
// removed while processes hold it is replaced by the next Ring that
// notices (at most checkEvery after), and a watcher whose file went
// away watches the new one (WatchBell); meanwhile the engine's slow poll
// still finds every commit.
type Bell struct {
	path string

	mu      sync.Mutex
	f       *os.File
	checked time.Time // when f was last compared with the file at path
}

// checkEvery is how often Ring makes sure its file is still the one at
// the bell's path.
const checkEvery = time.Second

// OpenBell opens (creating it, 0600, if missing) the bell at path.
func OpenBell(path string) (*Bell, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	f, err := openBellFile(path)
	if err != nil {
		return nil, err
	}
	return &Bell{path: path, f: f, checked: time.Now()}, nil
}

func openBellFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- the store's own bell, next to the file its DSN names
}

var ring = []byte{'!'}

// Ring tells the bell's watchers that something may have changed. It is
// safe for concurrent use, and a nil Bell rings nothing.
func (b *Bell) Ring() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.f == nil {
		return os.ErrClosed
	}
	if now := time.Now(); now.Sub(b.checked) >= checkEvery {
		b.checked = now
		b.reopenIfReplaced()
	}
	_, err := b.f.WriteAt(ring, 0)
	return err
}

// reopenIfReplaced opens the file at the bell's path when it is no
// longer the one b holds (removed, or replaced by another).
func (b *Bell) reopenIfReplaced() {
	held, err := b.f.Stat()
	if err != nil {
		return
	}
	if there, err := os.Stat(b.path); err == nil && os.SameFile(held, there) {
		return
	}
	f, err := openBellFile(b.path)
	if err != nil {
		return
	}
	_ = b.f.Close()
	b.f = f
}

// Close releases the bell's descriptor; Ring then fails. It is safe to
// call more than once, and on a nil Bell.
func (b *Bell) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.f == nil {
		return nil
	}
	err := b.f.Close()
	b.f = nil
	return err
}
