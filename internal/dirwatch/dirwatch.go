// Package dirwatch turns writes to files in one directory into wake-ups.
//
// The SQLite and JSON backends are shared by several processes through the
// file system, with no server to announce a commit. Polling the store finds
// other processes' commits, but only a poll interval late; on Linux a
// watcher sees the write to the WAL (or journal) as it happens, so a lock
// waiter or a subscriber in another process wakes within a millisecond. A
// wake-up is only a hint: the reader still reads the store to see whether
// anything changed, and the poll stays as a slow guard against a lost one.
package dirwatch

import "errors"

// ErrUnsupported is returned by New where the platform has no watcher
// (anything but Linux for now): the caller polls instead.
var ErrUnsupported = errors.New("dirwatch: not supported on this platform")

// Watcher signals on C when a watched file in its directory was written,
// created, renamed into place or deleted. Signals are coalesced: C has
// capacity 1, so a reader that drains it after each wake misses nothing
// it would act on. While a signal waits in C the watcher reads no more
// events (the kernel queues them, merging repeats of one): a reader that
// does not want news for a while stops taking from C and costs nothing
// meanwhile, and the next take still tells it that something changed.
type Watcher struct {
	// C receives a value after writes to the watched files. After Close
	// it receives nothing more; it is never closed.
	C <-chan struct{}

	impl
}

// Start begins watching, for a watcher made by NewLater or WatchBellLater
// (the others began in their constructor): C then receives a value at
// once, since writes before Start were not heard. A watch costs a
// process little while it runs but some 8-20 ms to end (closing an
// inotify descriptor that holds a watch waits for the kernel's grace
// period, at Close or at exit), which a process that never waits need
// not pay. Start is safe to call more than once and from any goroutine;
// after Close it returns os.ErrClosed. Where watching cannot begin (the
// user's inotify instances or watches are used up) Start returns the
// error and, for a watcher made with a positive fallback, signals C every
// fallback until Close instead: a poll in place of the watch.
func (w *Watcher) Start() error {
	if w == nil {
		return ErrUnsupported
	}
	return w.impl.start()
}

// Close stops the watcher and releases its descriptor. It waits for the
// watcher's goroutine to end and is safe to call more than once.
func (w *Watcher) Close() error {
	if w == nil {
		return nil
	}
	return w.impl.close()
}
