package dirwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

type impl struct {
	f       *os.File
	fd      int // f's descriptor, for adding watches
	once    sync.Once
	done    chan struct{}
	closing chan struct{} // closed by Close, for a goroutine blocked in hand
}

const supported = true

// New watches dir for writes to the files named in names (all files when
// names is empty). Subdirectories are not watched.
func New(dir string, names ...string) (*Watcher, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	const mask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE
	return watch(dir, mask, func(_ int, b []byte) bool { return matches(b, want) })
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
	if err := touchBell(path); err != nil {
		return nil, err
	}
	return watch(path, bellMask, func(fd int, b []byte) bool {
		if movedAway(b) {
			// Watch whatever is at the path now; adding a watch of an
			// inode already watched only renews it.
			if touchBell(path) == nil {
				_, _ = unix.InotifyAddWatch(fd, path, bellMask)
			}
		}
		return true
	})
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

// watch starts a watcher of path with mask; heard says whether a read of
// events is news for C (fd is the watcher's inotify descriptor).
func watch(path string, mask uint32, heard func(fd int, b []byte) bool) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("dirwatch: inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, mask); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dirwatch: watch %s: %w", path, err)
	}
	// A non-blocking descriptor goes to the runtime's poller, so Close
	// wakes a Read that is waiting.
	f := os.NewFile(uintptr(fd), "inotify")
	c := make(chan struct{}, 1)
	w := &Watcher{C: c, impl: impl{f: f, fd: fd, done: make(chan struct{}), closing: make(chan struct{})}}
	go w.run(c, heard)
	return w, nil
}

func (w *Watcher) run(c chan<- struct{}, heard func(fd int, b []byte) bool) {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Anything else is unexpected; say "something may have
			// changed" and stop: the caller's poll still runs.
			signal(c)
			return
		}
		if heard(w.fd, buf[:n]) && !w.hand(c) {
			return
		}
	}
}

// hand puts a signal in c and, when one already waits there, blocks until
// the reader takes it (or Close), so that no event is read while nobody
// takes them. It reports false on Close.
func (w *Watcher) hand(c chan<- struct{}) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
	}
	select {
	case c <- struct{}{}:
		return true
	case <-w.closing:
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

func (i *impl) close() error {
	var err error
	i.once.Do(func() {
		close(i.closing)
		err = i.f.Close()
		<-i.done
	})
	return err
}
