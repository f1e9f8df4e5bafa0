package dashboard_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/workspace"
)

// streamMsg is one event of the dashboard stream and when it came.
type streamMsg struct {
	name string
	at   time.Time
}

// openStream reads the dashboard stream's event names.
func openStream(t *testing.T, e *env, after int64) (<-chan string, func()) {
	t.Helper()
	msgs, stop := openStreamTimed(t, e, after)
	names := make(chan string, 10000)
	go func() {
		defer close(names)
		for m := range msgs {
			names <- m.name
		}
	}()
	return names, stop
}

func openStreamTimed(t *testing.T, e *env, after int64) (<-chan streamMsg, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.hs.URL+"/ui/stream?after="+formatInt(after), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan streamMsg, 10000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				out <- streamMsg{name, time.Now()}
			}
		}
	}()
	return out, func() { cancel(); resp.Body.Close(); <-done }
}

func TestStreamTellsAPageWhatChangedInAnotherHandle(t *testing.T) {
	e := newEnv(t, server.Options{})
	seed(t, e.ws)
	head, err := e.ws.Events().Head(context.Background())
	require.NoError(t, err)
	names, stop := openStream(t, e, head)
	defer stop()

	other := e.other()
	_, err = other.Tasks().Create(context.Background(), workspace.Write{Actor: "elsewhere"}, workspace.NewTask{Title: "from another handle"})
	require.NoError(t, err)
	got := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !got["tasks"] || !got["events"] || !got["agents"] {
		select {
		case n := <-names:
			got[n] = true
		case <-deadline:
			t.Fatalf("the stream named %v, not tasks, events and agents", got)
		}
	}
	assert.False(t, got["artifacts"], "a task change does not refresh artifacts")

	// A page that connects with an older cursor hears at once that it
	// missed something.
	late, stopLate := openStream(t, e, head)
	defer stopLate()
	select {
	case n := <-late:
		assert.NotEmpty(t, n)
	case <-time.After(5 * time.Second):
		t.Fatal("a page behind the hub was not told to refresh")
	}
}

// TestPostgresPagesFollowAnotherHandle runs the live path on Postgres,
// where another handle's commits arrive by LISTEN/NOTIFY: the stream
// names the view and the fragment then shows the write.
func TestPostgresPagesFollowAnotherHandle(t *testing.T) {
	e := newEnvOn(t, pgtest.NewDSN(t), server.Options{})
	seed(t, e.ws)
	head, err := e.ws.Events().Head(context.Background())
	require.NoError(t, err)
	names, stop := openStream(t, e, head)
	defer stop()
	_, err = e.other().Tasks().Create(context.Background(), workspace.Write{Actor: "remote"}, workspace.NewTask{Title: "from another host"})
	require.NoError(t, err)
	deadline := time.After(5 * time.Second)
	for got := ""; got != "tasks"; {
		select {
		case got = <-names:
		case <-deadline:
			t.Fatal("the stream did not name the board")
		}
	}
	_, body := e.get("/ui/frag/board")
	assert.Contains(t, body, "from another host")
	_, body = e.get("/ui/feed")
	assert.Contains(t, body, "remote")
}

func TestStreamCoalescesABurst(t *testing.T) {
	e := newEnv(t, server.Options{})
	head, err := e.ws.Events().Head(context.Background())
	require.NoError(t, err)
	msgs, stop := openStreamTimed(t, e, head)
	ctx := context.Background()
	const n = 1000
	ops := make([]workspace.Op, 0, 100)
	for i := range n {
		ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "glossary", Key: "k" + formatInt(int64(i)), Body: "x"}})
		if len(ops) == cap(ops) {
			_, err := e.ws.Commit(ctx, workspace.Batch{Actor: "burst", Ops: ops})
			require.NoError(t, err)
			ops = ops[:0]
		}
	}
	last, err := e.ws.Events().Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head+n, last)
	// Wait for the stream to settle, then count.
	time.Sleep(2 * dashboard.DefaultCoalesce)
	stop()
	var notes []time.Time
	count := map[string]int{}
	for m := range msgs {
		count[m.name]++
		if m.name == "notes" {
			notes = append(notes, m.at)
		}
	}
	require.NotEmpty(t, notes)
	// At most one message per view per interval: n messages span at
	// least n-1 intervals (halved here: a reader that falls behind reads two at once).
	span := notes[len(notes)-1].Sub(notes[0])
	assert.GreaterOrEqual(t, span, time.Duration(len(notes)-1)*dashboard.DefaultCoalesce/2,
		"%d events gave %d refreshes in %v", n, len(notes), span)
	assert.Less(t, len(notes), n/10, "a burst is coalesced")
	assert.Zero(t, count["tasks"])
}

func TestHubStopsWhenThePagesLeave(t *testing.T) {
	e := newEnv(t, server.Options{})
	_, stop := openStream(t, e, 0)
	stop()
	// Another stream after the first left starts the hub again and hears
	// new writes.
	names, stop2 := openStream(t, e, 0)
	defer stop2()
	_, err := e.ws.Locks().Acquire(context.Background(), workspace.AcquireRequest{Resource: "r", Owner: "a", TTL: time.Minute})
	require.NoError(t, err)
	select {
	case n := <-names:
		assert.Contains(t, []string{"locks", "events", "agents"}, n)
	case <-time.After(5 * time.Second):
		t.Fatal("no refresh after the hub restarted")
	}
}
