package conformance

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// The message roles of a child process.
const (
	roleSend = "send" // send messages to "watcher" until killed, saying each one's ID once it is acknowledged
	roleAck  = "ack"  // ack the one message in the actor's inbox, saying whose ack was recorded
)

// runMessageChild plays a message role; it reports whether role was one.
func runMessageChild(ctx context.Context, t *testing.T, ws *workspace.Workspace, role, actor string, count int, say func(string, ...any)) bool {
	switch role {
	case roleSend:
		for i := 0; ctx.Err() == nil; i++ {
			m, err := ws.Messages().Send(asPrincipal(ctx, actor), workspace.Write{Actor: actor}, workspace.NewMsg{To: []string{"watcher"}, Body: fmt.Sprintf("message %d", i)})
			if err != nil {
				t.Fatalf("child %s: send %d: %v", actor, i, err)
			}
			say("sent %s", m.ID)
		}
	case roleAck:
		// Its whole inbox, not what it owes: another acker may have
		// answered for the role already.
		p, err := ws.Messages().Inbox(asPrincipal(ctx, actor), workspace.InboxQuery{Actor: actor})
		if err != nil || len(p.Messages) != 1 {
			t.Fatalf("child %s: inbox: %v, %d messages", actor, err, len(p.Messages))
		}
		m, err := ws.Messages().Ack(asPrincipal(ctx, actor), workspace.Write{Actor: actor}, p.Messages[0].ID, actor)
		if err != nil || len(m.Acks) != 1 {
			t.Fatalf("child %s: ack: %v, %d acks", actor, err, len(m.Acks))
		}
		say("acked %s", m.Acks[0].By)
	case roleSendEach:
		runSendEach(ctx, t, ws, actor, count, say)
	default:
		return false
	}
	return true
}

// testKilledSenderLosesNothing: a child sends messages as fast as it can
// and is killed with SIGKILL; every message it was told was sent is there,
// in its recipient's inbox, with its message.sent event.
func testKilledSenderLosesNothing(t *testing.T, h Harness) {
	ctx := caseCtx(t, 60*time.Second)
	dsn, ws := fresh(t, h)
	present(t, ws, "watcher")
	c := startChild(t, ctx, dsn, roleSend, "sender", 0, time.Now().Add(45*time.Second))
	select {
	case <-c.ready:
	case <-c.done:
		require.Fail(t, "child ended before it was ready", "%v\n%s", c.err, c.describe())
	}
	_, err := io.WriteString(c.stdin, "go\n")
	require.NoError(t, err)
	for n := 0; n < 20; {
		select {
		case <-c.said:
			n++
		case <-c.done:
			require.Fail(t, "child ended before it sent 20 messages", "%v\n%s", c.err, c.describe())
		case <-ctx.Done():
			require.Fail(t, "child sent fewer than 20 messages", c.describe())
		}
	}
	require.NoError(t, c.cmd.Process.Kill())
	<-c.done
	c.mu.Lock()
	lines := append([]string(nil), c.lines...)
	c.mu.Unlock()

	after := open(t, dsn) // a handle that saw none of it
	// The inbox and the events are two reads. Behind a server, the send
	// under way when the sender died may still commit after the first and
	// before the second: they are read again until a read of both finds
	// the same messages, which a store that keeps the invariant reaches
	// once that send is done.
	var inbox map[string]bool
	var evs []workspace.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		inbox = map[string]bool{}
		for p, q := (workspace.InboxPage{}), (workspace.InboxQuery{Actor: "watcher", Limit: 1000}); ; {
			p, err = after.Messages().Inbox(asPrincipal(ctx, "watcher"), q)
			require.NoError(t, err)
			for _, m := range p.Messages {
				inbox[m.ID] = true
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
		evs = readAll(t, after, workspace.EventQuery{Types: []string{workspace.EventMessageSent}})
		same := len(evs) == len(inbox)
		for _, e := range evs {
			same = same && inbox[e.Subject.ID]
		}
		if same || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sent := 0
	for _, l := range lines {
		id, ok := strings.CutPrefix(l, "sent ")
		if !ok {
			continue
		}
		sent++
		m, err := after.Messages().Get(asPrincipal(ctx, "watcher"), id)
		require.NoError(t, err, "message %s, acknowledged to its sender, is there", id)
		assert.Equal(t, "sender", m.From)
		assert.True(t, inbox[id], "message %s is in its recipient's inbox", id)
	}
	require.GreaterOrEqual(t, sent, 20)
	assert.Len(t, evs, len(inbox), "one message.sent event per message in the inbox")
	for _, e := range evs {
		assert.True(t, inbox[e.Subject.ID], "message.sent for %s, which is in the inbox", e.Subject.ID)
	}
	assert.GreaterOrEqual(t, len(inbox), sent, "every acknowledged send, and perhaps the one under way when it died")
}

// testRacingAckersRecordOne: eight processes, each a member of the
// role a message was sent to, ack it at once: one ack is recorded, and
// every acker is answered with it.
func testRacingAckersRecordOne(t *testing.T, h Harness) {
	ctx := caseCtx(t, 90*time.Second)
	dsn, ws := fresh(t, h)
	policy := messagePolicy
	var actors []string
	for i := range 8 {
		a := fmt.Sprintf("acker-%d", i)
		actors = append(actors, a)
		policy = strings.Replace(policy, "[actors]\n", "[actors]\n"+a+" = [\"reviewer\"]\n", 1)
	}
	applyPolicy(t, ctx, ws, policy)
	_, err := ws.Messages().Send(asPrincipal(ctx, "lead"), as("lead"), workspace.NewMsg{To: []string{"role:reviewer"}, Body: "one of you", RequiresAck: true})
	require.NoError(t, err)
	var kids []*child
	for _, a := range actors {
		kids = append(kids, startChild(t, ctx, dsn, roleAck, a, 0, time.Now().Add(75*time.Second)))
	}
	for _, c := range kids {
		select {
		case <-c.ready:
		case <-c.done:
			require.Fail(t, "child ended before it was ready", "%v\n%s", c.err, c.describe())
		}
	}
	for _, c := range kids {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err)
	}
	by := map[string]int{}
	for _, c := range kids {
		<-c.done
		require.NoError(t, c.err, c.describe())
		c.mu.Lock()
		for _, l := range c.lines {
			if who, ok := strings.CutPrefix(l, "acked "); ok {
				by[who]++
			}
		}
		c.mu.Unlock()
	}
	require.Len(t, by, 1, "every acker was answered with the one ack recorded: %v", by)
	for who, n := range by {
		assert.Equal(t, 8, n, "all eight answered with %s's ack", who)
	}
	assert.Len(t, eventsOfType(t, ws, workspace.EventMessageAcked), 1)
}
