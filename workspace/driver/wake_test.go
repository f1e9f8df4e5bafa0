package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// TestSubscriberOnAnotherStoreGetsSporadicAndStreamedCommits: SQLite's
// file watch announces a commit before it can be read, so a subscriber on
// another store reads a commit that follows a quiet spell once the
// notifications have settled, and a stream of commits at once. Both must
// deliver every event, in order: commits a few milliseconds apart (each
// settles, where the store is watched: the watcher's settled reads show
// it), then back to back. Where it is polled (no inotify) the events must
// come all the same.
func TestSubscriberOnAnotherStoreGetsSporadicAndStreamedCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	open := func() *workspace.Workspace {
		ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return ws
	}
	writer, reader := open(), open()
	watched := driver.NotifiesEarly(reader)
	if runtime.GOOS == "linux" {
		require.True(t, watched, "on Linux the store is watched with inotify")
	}
	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })

	put := func(i int) error {
		_, err := writer.Notes().Put(ctx, workspace.Write{Actor: "writer"},
			workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", i)})
		return err
	}
	next := func(want int64) {
		t.Helper()
		select {
		case m, ok := <-sub.C():
			require.True(t, ok, "subscription ended: %v", sub.Err())
			require.False(t, m.Progress)
			require.Equal(t, want, m.Event.Seq)
		case <-ctx.Done():
			t.Fatalf("event %d not delivered", want)
		}
	}
	const sporadic, streamed = 30, 300
	for i := range sporadic {
		time.Sleep(3 * time.Millisecond) // a quiet spell: this commit settles
		require.NoError(t, put(i))
		next(int64(i + 1))
	}
	// Every sporadic commit should settle; half leaves room for a loaded
	// machine's notifications bunching up, and none would fail.
	if watched {
		assert.GreaterOrEqual(t, driver.SettledReads(reader), int64(sporadic/2))
	} else {
		assert.Zero(t, driver.SettledReads(reader), "a polled store settles nothing")
	}

	errs := make(chan error, 1)
	go func() {
		for i := range streamed {
			if err := put(sporadic + i); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := range streamed {
		next(int64(sporadic + i + 1))
	}
	require.NoError(t, <-errs)
}

// TestCommitOfAnotherStoreJustAfterOursReachesOurSubscriber: a watched
// store's changes that come while its handle writes, or just after it
// published a commit, are put off as most likely its own, and read once
// they pause. A commit of another store that lands in that window must
// still reach a subscriber, long before the safety poll (twenty minutes
// here): each round, A commits, B commits at once, and A's
// subscriber must see both before A writes again. Without the read that
// ends the putting off, B's commit would wait for A's next.
func TestCommitOfAnotherStoreJustAfterOursReachesOurSubscriber(t *testing.T) {
	for _, backend := range []string{"sqlite", "json"} {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dsn := backend + ":" + filepath.Join(t.TempDir(), "ws")
			if backend == "sqlite" {
				dsn += ".db"
			}
			open := func() *workspace.Workspace {
				ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true, PollInterval: time.Minute})
				require.NoError(t, err)
				t.Cleanup(func() { _ = ws.Close() })
				return ws
			}
			a, b := open(), open()
			sub, err := a.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = sub.Close() })
			put := func(ws *workspace.Workspace, key string) {
				t.Helper()
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "agent"}, workspace.NotePut{Kind: "decision", Key: key})
				require.NoError(t, err)
			}
			const rounds = 40
			for i := range rounds {
				put(a, fmt.Sprintf("a%d", i))
				put(b, fmt.Sprintf("b%d", i))
				for _, want := range []int64{int64(2*i + 1), int64(2*i + 2)} {
					select {
					case m, ok := <-sub.C():
						require.True(t, ok, "subscription ended: %v", sub.Err())
						require.Equal(t, want, m.Event.Seq)
					case <-ctx.Done():
						t.Fatalf("round %d: event %d not delivered", i, want)
					}
				}
			}
			if runtime.GOOS == "linux" {
				// Watched (inotify): A's own commits were put off and read.
				assert.Positive(t, driver.OwnReads(a))
			}
		})
	}
}
