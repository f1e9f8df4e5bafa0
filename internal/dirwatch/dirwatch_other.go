//go:build !linux

package dirwatch

type impl struct{}

const supported = false

// New returns ErrUnsupported: there is no watcher on this platform yet.
func New(string, ...string) (*Watcher, error) { return nil, ErrUnsupported }

// WatchBell returns ErrUnsupported: there is no watcher on this platform yet.
func WatchBell(string) (*Watcher, error) { return nil, ErrUnsupported }

func (impl) close() error { return nil }
