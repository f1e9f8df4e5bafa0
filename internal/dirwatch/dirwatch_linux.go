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
	once    sync.Once
	done    chan struct{}
	closing chan struct{} // closed by Close, for a goroutine blocked in hand
}

// New watches dir for writes to the files named in names (all files when
// names is empty). Subdirectories are not watched.
func New(dir string, names ...string) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("dirwatch: inotify: %w", err)
	}
	const mask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dirwatch: watch %s: %w", dir, err)
	}
	// A non-blocking descriptor goes to the runtime's poller, so Close
	// wakes a Read that is waiting.
	f := os.NewFile(uintptr(fd), "inotify")
	c := make(chan struct{}, 1)
	w := &Watcher{C: c, impl: impl{f: f, done: make(chan struct{}), closing: make(chan struct{})}}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	go w.run(c, want)
	return w, nil
}

func (w *Watcher) run(c chan<- struct{}, want map[string]bool) {
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
		if matches(buf[:n], want) && !w.hand(c) {
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
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0])) // #nosec G103 -- the kernel's inotify_event layout
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return true
		}
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 || len(want) == 0 {
			return true
		}
		name := b[unix.SizeofInotifyEvent:end]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if want[string(name)] {
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
