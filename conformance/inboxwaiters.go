package conformance

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// roleSendEach is the child role that sends one message to each of the
// count waiters, saying each one's recipient and ID.
const roleSendEach = "send-each"

// inboxWaiters is how many long polls the waiter cases run at once.
const inboxWaiters = 30

// waiterName is the name of waiter i.
func waiterName(i int) string { return fmt.Sprintf("waiter%02d", i) }

// inboxWait is how long a waiter waits for its message: under the
// engine's 30 s safety re-read of a waiting poll, so that a wake that
// never came fails the case instead of arriving by the re-read.
const inboxWait = 25 * time.Second

// runSendEach sends one message to each of count waiters, in reverse.
func runSendEach(ctx context.Context, t *testing.T, ws *workspace.Workspace, actor string, count int, say func(string, ...any)) {
	for i := count - 1; i >= 0; i-- {
		m, err := ws.Messages().Send(asPrincipal(ctx, actor), workspace.Write{Actor: actor},
			workspace.NewMsg{To: []string{waiterName(i)}, Body: "for " + waiterName(i)})
		if err != nil {
			t.Fatalf("child %s: send to %s: %v", actor, waiterName(i), err)
		}
		say("sent %s %s", waiterName(i), m.ID)
	}
}

// awaitOwn long-polls waiter's inbox until it holds a message, and
// returns the messages of that page.
func awaitOwn(ctx context.Context, ws *workspace.Workspace, waiter string) ([]workspace.Msg, error) {
	for ctx.Err() == nil {
		// A server's long poll answers an empty page at its cap: poll again.
		p, err := ws.Messages().Inbox(asPrincipal(ctx, waiter), workspace.InboxQuery{Actor: waiter, Wait: true})
		if err != nil {
			return nil, err
		}
		if len(p.Messages) > 0 {
			return p.Messages, nil
		}
	}
	return nil, ctx.Err()
}

// startWaiters starts the waiters, spread over handles, each long-polling
// its own inbox; got[i] is what waiter i received once done is closed.
func startWaiters(t *testing.T, hs []*workspace.Workspace) (got [][]workspace.Msg, errs []error, done chan struct{}) {
	got, errs = make([][]workspace.Msg, inboxWaiters), make([]error, inboxWaiters)
	done = make(chan struct{})
	var wg sync.WaitGroup
	for i := range inboxWaiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(testCtx(t), inboxWait)
			defer cancel()
			got[i], errs[i] = awaitOwn(ctx, hs[i%len(hs)], waiterName(i))
		}()
	}
	go func() { wg.Wait(); close(done) }()
	// Not a measure: time for the polls to find their inboxes empty and
	// wait, so that most messages wake a waiting poll.
	time.Sleep(300 * time.Millisecond)
	return got, errs, done
}

// checkWaiters checks that each waiter received exactly its own message.
func checkWaiters(t *testing.T, got [][]workspace.Msg, errs []error, sent map[string]string) {
	t.Helper()
	for i := range inboxWaiters {
		if !assert.NoError(t, errs[i], "%s got no message", waiterName(i)) {
			continue
		}
		if assert.Len(t, got[i], 1, waiterName(i)) {
			assert.Equal(t, sent[waiterName(i)], got[i][0].ID, "%s got its own message", waiterName(i))
		}
	}
}

// testInboxWaitersEachGetTheirOwn: thirty long polls, spread over three
// handles, wait on their own inboxes; another handle sends each one
// message, from concurrent writers; every poll returns with its message.
func testInboxWaitersEachGetTheirOwn(t *testing.T, h Harness) {
	dsn, ws := fresh(t, h)
	names := make([]string, inboxWaiters)
	for i := range names {
		names[i] = waiterName(i)
	}
	present(t, ws, names...)
	got, errs, done := startWaiters(t, handles(t, dsn, 3))
	sender := open(t, dsn)
	ctx := testCtx(t)
	var (
		mu   sync.Mutex
		sent = map[string]string{}
		wg   sync.WaitGroup
	)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < inboxWaiters; i += 3 {
				m, err := sender.Messages().Send(asPrincipal(ctx, "sender"), as("sender"), workspace.NewMsg{To: []string{waiterName(i)}, Body: "for " + waiterName(i)})
				if !assert.NoError(t, err) {
					continue
				}
				mu.Lock()
				sent[waiterName(i)] = m.ID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	<-done
	checkWaiters(t, got, errs, sent)
}

// testInboxWaitersWokenByAChild: the same, with the messages sent by a
// child process, whose commits this process learns of from the store.
func testInboxWaitersWokenByAChild(t *testing.T, h Harness) {
	ctx := caseCtx(t, 90*time.Second)
	dsn, ws := fresh(t, h)
	names := make([]string, inboxWaiters)
	for i := range names {
		names[i] = waiterName(i)
	}
	present(t, ws, names...)
	c := startChild(t, ctx, dsn, roleSendEach, "sender", inboxWaiters, time.Now().Add(80*time.Second))
	select {
	case <-c.ready:
	case <-c.done:
		require.Fail(t, "child ended before it was ready", "%v\n%s", c.err, c.describe())
	}
	got, errs, done := startWaiters(t, handles(t, dsn, 3))
	_, err := io.WriteString(c.stdin, "go\n")
	require.NoError(t, err)
	<-done
	<-c.done
	sent := map[string]string{}
	c.mu.Lock()
	for _, l := range c.lines {
		if rest, ok := strings.CutPrefix(l, "sent "); ok {
			if name, id, ok := strings.Cut(rest, " "); ok {
				sent[name] = id
			}
		}
	}
	c.mu.Unlock()
	require.Len(t, sent, inboxWaiters, c.describe())
	checkWaiters(t, got, errs, sent)
}
