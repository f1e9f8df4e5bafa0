//go:build !unix

package sqlite

import (
	"context"
	"time"
)

// writers is a no-op where there is no flock: writers wait in SQLite's
// busy handler only.
type writers struct{}

func openWriters(string, time.Duration) (*writers, error) { return &writers{}, nil }

func (w *writers) lock(context.Context) (func(), error) { return func() {}, nil }

func (w *writers) close() error { return nil }
