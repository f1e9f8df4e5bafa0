package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

// TestSubscriberOnAnotherStoreGetsSporadicAndStreamedCommits: a
// subscriber on another SQLite store must get every event, in order, of
// commits a few milliseconds apart and then back to back, however the
// store is watched. On Linux a store rings its bell once a commit can be
// read, and the bell's watchers read at once; a store that cannot open
// its bell (here: a directory stands at its path) watches the WAL's
// writes, which come before the commit can be read, so a commit after a
// quiet spell is read once they settle (the settled reads show it).
// Where nothing is watched (no inotify) the store is polled, and the
// events must come all the same.
func TestSubscriberOnAnotherStoreGetsSporadicAndStreamedCommits(t *testing.T) {
	for _, watch := range []string{"bell", "wal"} {
		t.Run(watch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := filepath.Join(t.TempDir(), "ws.db")
			if watch == "wal" {
				require.NoError(t, os.Mkdir(path+"-bell", 0o700))
			}
			open := func() *workspace.Workspace {
				ws, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true})
				require.NoError(t, err)
				t.Cleanup(func() { _ = ws.Close() })
				return ws
			}
			writer, reader := open(), open()
			early := engine.NotifiesEarly(reader)
			if runtime.GOOS == "linux" {
				require.True(t, engine.Notifies(reader), "on Linux the store is watched with inotify")
				require.Equal(t, watch == "wal", early, "only the WAL's writes come early")
			}
			sporadicAndStreamed(ctx, t, writer, reader)
			// Every sporadic commit should settle; half leaves room for a
			// loaded machine's notifications bunching up, and none would fail.
			if early {
				assert.GreaterOrEqual(t, engine.SettledReads(reader), int64(sporadic/2))
			} else {
				assert.Zero(t, engine.SettledReads(reader), "a rung or polled store settles nothing")
			}
		})
	}
}

const sporadic, streamed = 30, 300

// sporadicAndStreamed has writer commit sporadic notes a few milliseconds
// apart, then streamed back to back, each of which a subscriber on reader
// must get in order.
func sporadicAndStreamed(ctx context.Context, t *testing.T, writer, reader *workspace.Workspace) {
	t.Helper()
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
	for i := range sporadic {
		time.Sleep(3 * time.Millisecond) // a quiet spell: an early store's commit settles
		require.NoError(t, put(i))
		next(int64(i + 1))
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
				assert.Positive(t, engine.OwnReads(a))
			}
		})
	}
}
