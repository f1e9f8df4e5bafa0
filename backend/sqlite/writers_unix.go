//go:build unix

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// writers queues a store's writers, across handles and processes, on an
// flock of a file next to the database. SQLite's busy handler makes a
// waiting writer sleep (up to 100 ms at a time) and try again, so with many
// handles contending the write lock sits idle while they sleep and an
// unlucky writer starves for seconds; a blocked flock is woken as soon as
// the lock is free. It is only a queue: SQLite's own locking still makes
// writers exclusive, and a writer that waits longer than patience goes on
// to SQLite's busy handler (and its busy_timeout) as before.
type writers struct {
	turn     chan struct{} // one writer of this handle at a time: flock cannot tell them apart
	file     *os.File
	patience time.Duration
}

func openWriters(dbPath string, patience time.Duration) (*writers, error) {
	f, err := os.OpenFile(dbPath+".writers.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: writer queue: %w", err)
	}
	return &writers{turn: make(chan struct{}, 1), file: f, patience: patience}, nil
}

// lock waits for this writer's turn, at most patience; the returned
// function ends it. Only ctx's end is an error.
func (w *writers) lock(ctx context.Context) (unlock func(), err error) {
	timer := time.NewTimer(w.patience)
	defer timer.Stop()
	select {
	case w.turn <- struct{}{}:
	case <-timer.C:
		return func() {}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := syscall.Flock(int(w.file.Fd()), syscall.LOCK_EX)
			if !errors.Is(err, syscall.EINTR) {
				got <- err
				return
			}
		}
	}()
	giveBack := func(err error) {
		if err == nil {
			_ = syscall.Flock(int(w.file.Fd()), syscall.LOCK_UN)
		}
		<-w.turn
	}
	select {
	case err := <-got:
		if err != nil {
			giveBack(err)
			return func() {}, nil // no queue: SQLite's locking alone
		}
		return func() { giveBack(nil) }, nil
	case <-timer.C:
		go func() { giveBack(<-got) }()
		return func() {}, nil
	case <-ctx.Done():
		go func() { giveBack(<-got) }()
		return nil, ctx.Err()
	}
}

func (w *writers) close() error { return w.file.Close() }
