package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/dirwatch"
	"github.com/agentspace/agentspace/workspace"
)

// TestACommitThatRingsNoBellIsStillFound: a process of a release before
// the bell commits without ringing it. A subscriber on a handle that
// watches only the bell still gets that commit, from the engine's slow
// poll, and the next commit that rings at once; in order, none twice.
// Where nothing can be watched (no inotify), every commit is polled for
// and the same must hold.
func TestACommitThatRingsNoBellIsStillFound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	open := func() *workspace.Workspace {
		ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return ws
	}
	reader, ringing := open(), open()
	openBell = func(string) (*dirwatch.Bell, error) { return nil, errors.New("a release before the bell") }
	silent := open()
	openBell = dirwatch.OpenBell

	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	put := func(ws *workspace.Workspace, i int) {
		t.Helper()
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "agent"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", i)})
		require.NoError(t, err)
	}
	next := func(want int64) {
		t.Helper()
		select {
		case m, ok := <-sub.C():
			require.True(t, ok, "subscription ended: %v", sub.Err())
			require.Equal(t, want, m.Event.Seq)
		case <-ctx.Done():
			t.Fatalf("event %d not delivered", want)
		}
	}
	for i := range 3 {
		put(silent, 2*i)
		next(int64(2*i + 1))
		put(ringing, 2*i+1)
		next(int64(2*i + 2))
	}
}
