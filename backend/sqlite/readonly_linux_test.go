package sqlite_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/dirwatch/dirwatchtest"
	"github.com/agentspace/agentspace/workspace"
)

// The file watch is inotify's, which only Linux has: this file is built
// there only, and counts the descriptors in /proc.

// TestAHandleWatchesTheFileOnlyOnceSomeoneWaits: a handle that reads and
// writes but never waits holds no file watch (ending one costs 8-20 ms at
// Close or at exit); the first subscriber starts it, and it still wakes
// for another process's commit (another handle's, with a store of its
// own).
func TestAHandleWatchesTheFileOnlyOnceSomeoneWaits(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	n0 := dirwatchtest.InotifyFDs(t)
	ws := openWS(t, "sqlite:"+path)
	other := openWS(t, "sqlite:"+path)
	_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = other.Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	assert.Equal(t, n0, dirwatchtest.InotifyFDs(t), "handles that never waited watch nothing")

	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}, Heartbeat: -1})
	require.NoError(t, err)
	defer sub.Close()
	_, err = other.Tasks().Create(ctx, workspace.Write{Actor: "b"}, workspace.NewTask{Title: "u"})
	require.NoError(t, err)
	select {
	case m := <-sub.C():
		require.False(t, m.Progress, "%+v", m)
		assert.Equal(t, head+1, m.Event.Seq)
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber never heard the other store's commit")
	}
	assert.Equal(t, n0+1, dirwatchtest.InotifyFDs(t), "the subscriber's handle watches, the other does not")
}
