package engine_test

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// heldStore wraps a real store to play a watched store whose
// notifications come before the commits they announce can be read: the
// test feeds its Changes channel, and its reads see the log only up to
// visible, as a reader of SQLite's WAL sees nothing of a commit whose
// frames are written but whose fsync has not ended.
type heldStore struct {
	driver.Store
	changes chan struct{}
	visible atomic.Int64
	// heads receives the head each read of the watch loop returned (a
	// read of the head alone).
	heads chan int64
}

// openStore opens the real store dsn names, for a test's wrapper around
// it; adjust, if set, changes the parsed DSN first.
func openStore(t *testing.T, dsn string, adjust func(p *driver.ParsedDSN)) driver.Store {
	t.Helper()
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	if adjust != nil {
		adjust(&p)
	}
	st, err := engine.OpenStore(context.Background(), p)
	require.NoError(t, err)
	return st
}

func newHeldStore(t *testing.T, dsn string) *heldStore {
	t.Helper()
	st := openStore(t, dsn, func(p *driver.ParsedDSN) {
		p.Config.Logger = slog.New(slog.DiscardHandler)
		p.Config.PollInterval = time.Minute
	})
	h := &heldStore{Store: st, changes: make(chan struct{}), heads: make(chan int64, 1024)}
	h.visible.Store(math.MaxInt64)
	return h
}

// Notify implements driver.Notifier with the test's channel, early.
func (h *heldStore) Notify(func() bool) driver.Notifications {
	return driver.Notifications{Changes: h.changes, Early: true}
}

func (h *heldStore) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	var other bool
	head := int64(-1)
	err := h.Store.View(ctx, func(tx driver.ReadTx) error {
		return fn(heldTx{ReadTx: tx, h: h, other: &other, head: &head})
	})
	if err == nil && !other && head >= 0 {
		select {
		case h.heads <- head:
		default:
		}
	}
	return err
}

type heldTx struct {
	driver.ReadTx
	h     *heldStore
	other *bool // it read something other than the head
	head  *int64
}

func (tx heldTx) Head(ctx context.Context) (int64, error) {
	head, err := tx.ReadTx.Head(ctx)
	head = min(head, tx.h.visible.Load())
	*tx.head = head
	return head, err
}

func (tx heldTx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	*tx.other = true
	evs, err := tx.ReadTx.Events(ctx, q)
	v := tx.h.visible.Load()
	for i, e := range evs {
		if e.Seq > v {
			return evs[:i], err
		}
	}
	return evs, err
}

// TestChangeSkippedWhileNobodyWaitedIsLookedUpUntilItCanBeRead drives the
// order that lost a wake-up: another store commits and its notification
// comes while nobody waits; a subscriber starts, and the read its arrival
// prompts comes before the commit can be read; no notification follows.
// The commit must reach the subscriber long before the safety poll
// (twenty minutes here).
func TestChangeSkippedWhileNobodyWaitedIsLookedUpUntilItCanBeRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	other, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })

	held := newHeldStore(t, dsn)
	ws := engine.New(held, workspace.Options{PollInterval: time.Minute})
	t.Cleanup(func() { _ = ws.Close() })

	// Another store commits; the commit cannot be read yet.
	held.visible.Store(0)
	_, err = other.Notes().Put(ctx, workspace.Write{Actor: "b"}, workspace.NotePut{Kind: "decision", Key: "b"})
	require.NoError(t, err)
	// Its notification comes while nobody waits: the watch loop leaves it
	// where it is (an idle process takes no wake-ups), but must take it
	// once someone waits.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		select {
		case held.changes <- struct{}{}:
		case <-ctx.Done():
		}
	}()
	time.Sleep(50 * time.Millisecond)
	require.Zero(t, engine.ChangesTaken(ws), "a notification taken while nobody waits")
	drain(held.heads)

	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	// The subscriber's arrival makes the loop take the notification and
	// read the head, which does not show the commit yet.
	select {
	case head := <-held.heads:
		require.Zero(t, head)
	case <-ctx.Done():
		t.Fatal("the subscriber's arrival prompted no read")
	}
	// Now the commit can be read; no notification says so.
	held.visible.Store(math.MaxInt64)
	select {
	case m := <-sub.C():
		require.Equal(t, int64(1), m.Event.Seq)
	case <-time.After(20 * time.Second):
		t.Fatal("the commit was not delivered: the wake-up was lost")
	}
	select {
	case <-sent:
	default:
		t.Fatal("the notification was never taken")
	}
}

func (tx heldTx) Floor(ctx context.Context) (int64, error) {
	*tx.other = true
	return tx.ReadTx.Floor(ctx)
}

func drain(c chan int64) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
