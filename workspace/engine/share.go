package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Handles that Open gives out for one store in one process share one core:
// one store (one connection pool, one SQLite or journal writer), one
// committer and one hub. Writers on different handles then share group
// commits, as writers on one handle do, instead of queueing for the store's
// write lock one transaction at a time; a commit wakes every handle's
// waiters and subscribers from memory, with no notification round trip.
// Each handle still closes on its own: its waits and subscriptions end with
// ErrClosed, and the store closes with the last handle.
//
// Handles share only when everything that configures the core is the
// same: the DSN (with the working directory, for file paths) and the
// Options. Options.Private, or ws_private=true in the DSN, opts out.

var (
	sharedMu    sync.Mutex
	sharedCores = map[string]*core{}
)

// shareKey identifies the core a handle opened with cfg and o may share.
// Two handles get the same key only if their stores and options are the same.
func shareKey(cfg driver.Config, o workspace.Options) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%t\x00%d\x00%d\x00%d\x00%d\x00%d\x00%p\x00%p", cfg.Scheme, cfg.DSN,
		cfg.AutoMigrate, o.MaxArtifactSize, o.IdempotencyTTL, o.PollInterval, o.GroupWait, o.PolicyRecheck, o.Logger, o.Clock)
	keys := make([]string, 0, len(cfg.Params))
	for k := range cfg.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s=%s", k, cfg.Params[k])
	}
	if cfg.DSN != cfg.Target {
		// A path: the same relative name after a chdir is another store.
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("working directory: %w", err)
		}
		fmt.Fprintf(&b, "\x00%s", wd)
	}
	return b.String(), nil
}

// openShared returns a handle on the core registered under key, opening
// its store with open when there is none. Concurrent opens of one key wait
// for the first; one whose ctx ends first returns, and its place is given
// back once the store is open. A waiter whose ctx is live tries again when
// the first open failed only because the first opener's ctx ended.
func openShared(ctx context.Context, key string, o workspace.Options, open func() (driver.Store, error)) (*workspace.Workspace, error) {
	for {
		sharedMu.Lock()
		c := sharedCores[key]
		if c == nil {
			break
		}
		c.refs++
		sharedMu.Unlock()
		select {
		case <-c.ready:
		case <-ctx.Done():
			go func() {
				<-c.ready
				if c.openErr == nil {
					_ = c.release()
				}
			}()
			return nil, ctx.Err()
		}
		if c.openErr == nil {
			return c.handle().ws(), nil
		}
		if ctx.Err() == nil && (errors.Is(c.openErr, context.Canceled) || errors.Is(c.openErr, context.DeadlineExceeded)) {
			continue
		}
		return nil, c.openErr
	}
	// sharedMu is held: register the store being opened.
	c := &core{key: key, refs: 1, ready: make(chan struct{})}
	sharedCores[key] = c
	sharedMu.Unlock()

	st, err := open()
	if err != nil {
		sharedMu.Lock()
		delete(sharedCores, key)
		sharedMu.Unlock()
		c.openErr = err
		close(c.ready)
		return nil, err
	}
	c.start(st, o)
	close(c.ready)
	return c.handle().ws(), nil
}

// Attach returns another handle on h's core (see workspace.Workspace.Attach).
func (h *handle) Attach() (*workspace.Workspace, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if h.closed.Load() {
		return nil, workspace.ErrClosed
	}
	h.core.refs++
	return h.core.handle().ws(), nil
}

// release lets go of one handle's share of c, and stops c with the last.
func (c *core) release() error {
	sharedMu.Lock()
	c.refs--
	last := c.refs == 0
	if last && c.key != "" && sharedCores[c.key] == c {
		delete(sharedCores, c.key)
	}
	sharedMu.Unlock()
	if !last {
		return nil
	}
	return c.stop()
}
