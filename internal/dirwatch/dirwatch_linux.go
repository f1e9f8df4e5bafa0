package dirwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type impl struct {
	// mk makes the inotify descriptor and its watch; heard says
	// whether a read of its events is news for C (see watch).
	mk    func() (int, error)
	heard func(fd int, b []byte) bool
	c     chan struct{}
	// fallback is how often C is signalled when watching cannot begin
	// (Later's Start): 0 for a watcher that began in its constructor.
	fallback time.Duration

	mu      sync.Mutex
	started bool
	closed  bool
	f       *os.File
	fd      int           // f's descriptor, for adding watches
	done    chan struct{} // closed when the started goroutine ends
	closing chan struct{} // closed by Close, for a goroutine blocked in hand
}

const supported = true

// New watches dir for writes to the files named in names (all files when
// names is empty). Subdirectories are not watched.
func New(dir string, names ...string) (*Watcher, error) {
	return started(NewLater(dir, 0, names...))
}

// NewLater is New for a watcher that does not watch until Start: see
// Watcher.Start, and fallback there.
func NewLater(dir string, fallback time.Duration, names ...string) (*Watcher, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	const mask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE
	return watch(dir, mask, fallback, func(_ int, b []byte) bool { return matches(b, want) }), nil
}

// started starts w, which its constructor made, and returns it.
func started(w *Watcher, err error) (*Watcher, error) {
	if err != nil {
		return nil, err
	}
	if err := w.begin(false); err != nil {
		return nil, err
	}
	return w, nil
}

// bellMask is what a bell's watch hears: a ring (a write), and the file
// being removed or replaced (a change of its link count is IN_ATTRIB).
const bellMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// WatchBell watches the bell at path (creating the file if missing): C
// receives a value after each ring. Only the bell's own file is watched,
// so writes to the other files of its directory cost its watchers
// nothing. If the file is removed or replaced, the watch follows the
// path to the file there (creating it again).
func WatchBell(path string) (*Watcher, error) {
	return started(WatchBellLater(path, 0))
}

// WatchBellLater is WatchBell for a watcher that does not watch until
// Start (see Watcher.Start, and fallback there). The bell is created now.
func WatchBellLater(path string, fallback time.Duration) (*Watcher, error) {
	if err := touchBell(path); err != nil {
		return nil, err
	}
	return watch(path, bellMask, fallback, func(fd int, b []byte) bool {
		if movedAway(b) {
			// Watch whatever is at the path now; adding a watch of an
			// inode already watched only renews it.
			if touchBell(path) == nil {
				_, _ = unix.InotifyAddWatch(fd, path, bellMask)
			}
		}
		return true
	}), nil
}

// touchBell creates the bell at path if it is missing.
func touchBell(path string) error {
	f, err := openBellFile(path)
	if err != nil {
		return fmt.Errorf("dirwatch: bell: %w", err)
	}
	return f.Close()
}

// movedAway reports whether a read of events says a watched file may no
// longer be the one at its path.
func movedAway(b []byte) bool {
	return anyEvent(b, func(mask uint32, _ []byte) bool {
		return mask&(unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_Q_OVERFLOW) != 0
	})
}

// watch makes a watcher of path with mask, not started; heard says
// whether a read of events is news for C (fd is the watcher's inotify
// descriptor).
func watch(path string, mask uint32, fallback time.Duration, heard func(fd int, b []byte) bool) *Watcher {
	c := make(chan struct{}, 1)
	mk := func() (int, error) {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			return -1, fmt.Errorf("dirwatch: inotify: %w", err)
		}
		if _, err := unix.InotifyAddWatch(fd, path, mask); err != nil {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("dirwatch: watch %s: %w", path, err)
		}
		return fd, nil
	}
	return &Watcher{C: c, impl: impl{mk: mk, heard: heard, c: c, fallback: fallback}}
}

// begin begins watching; with signalFirst, C gets a value at once (writes
// before now were not heard). A watcher that cannot begin returns the
// error, or with a fallback signals C every fallback until Close and
// returns the error all the same. Closed, it returns os.ErrClosed.
func (i *impl) begin(signalFirst bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	switch {
	case i.closed:
		return os.ErrClosed
	case i.started:
		return nil
	}
	fd, err := i.mk()
	if err != nil && i.fallback <= 0 {
		return err
	}
	i.started = true
	i.done, i.closing = make(chan struct{}), make(chan struct{})
	if signalFirst {
		signal(i.c)
	}
	if err != nil {
		go i.tick()
		return err
	}
	// A non-blocking descriptor goes to the runtime's poller, so Close
	// wakes a Read that is waiting.
	i.f, i.fd = os.NewFile(uintptr(fd), "inotify"), fd
	go i.run()
	return nil
}

// tick signals C every fallback until Close: the watcher could not begin.
func (i *impl) tick() {
	defer close(i.done)
	t := time.NewTicker(i.fallback)
	defer t.Stop()
	for {
		select {
		case <-i.closing:
			return
		case <-t.C:
			if !i.hand() {
				return
			}
		}
	}
}

func (i *impl) run() {
	defer close(i.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := i.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Anything else is unexpected; say "something may have
			// changed" and stop: the caller's poll still runs.
			signal(i.c)
			return
		}
		if i.heard(i.fd, buf[:n]) && !i.hand() {
			return
		}
	}
}

// hand puts a signal in c and, when one already waits there, blocks until
// the reader takes it (or Close), so that no event is read while nobody
// takes them. It reports false on Close.
func (i *impl) hand() bool {
	select {
	case i.c <- struct{}{}:
		return true
	default:
	}
	select {
	case i.c <- struct{}{}:
		return true
	case <-i.closing:
		return false
	}
}

// matches reports whether a read of inotify events names a wanted file, or
// says that events were lost (then anything may have changed).
func matches(b []byte, want map[string]bool) bool {
	return anyEvent(b, func(mask uint32, name []byte) bool {
		return mask&unix.IN_Q_OVERFLOW != 0 || len(want) == 0 || want[string(name)]
	})
}

// anyEvent reports whether f holds for one of the events of b, a read of
// an inotify descriptor (name is the file's, without its NUL padding). A
// torn read, an event cut short, counts as one for which f holds: what it
// said is unknown.
func anyEvent(b []byte, f func(mask uint32, name []byte) bool) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0])) // #nosec G103 -- the kernel's inotify_event layout
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return true
		}
		name := b[unix.SizeofInotifyEvent:end]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if f(ev.Mask, name) {
			return true
		}
		b = b[end:]
	}
	return false
}

func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (i *impl) start() error { return i.begin(true) }

func (i *impl) close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil
	}
	i.closed = true
	if !i.started {
		return nil
	}
	close(i.closing)
	var err error
	if i.f != nil {
		err = i.f.Close()
	}
	<-i.done
	return err
}
