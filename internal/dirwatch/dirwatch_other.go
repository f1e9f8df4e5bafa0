//go:build !linux

package dirwatch

import "time"

type impl struct{}

const supported = false

// New returns ErrUnsupported: there is no watcher on this platform yet.
func New(string, ...string) (*Watcher, error) { return nil, ErrUnsupported }

// WatchBell returns ErrUnsupported: there is no watcher on this platform yet.
func WatchBell(string) (*Watcher, error) { return nil, ErrUnsupported }

// NewLater returns ErrUnsupported: there is no watcher on this platform yet.
func NewLater(string, time.Duration, ...string) (*Watcher, error) { return nil, ErrUnsupported }

// WatchBellLater returns ErrUnsupported: there is no watcher on this platform yet.
func WatchBellLater(string, time.Duration) (*Watcher, error) { return nil, ErrUnsupported }

func (impl) start() error { return ErrUnsupported }

func (impl) close() error { return nil }
