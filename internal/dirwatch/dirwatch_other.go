//go:build !linux

package dirwatch

type impl struct{}

// New returns ErrUnsupported: there is no watcher on this platform yet.
func New(string, ...string) (*Watcher, error) { return nil, ErrUnsupported }

func (impl) close() error { return nil }
