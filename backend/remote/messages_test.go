package remote_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestServerEscalatesByItsOwnClock is the remote form of the escalation
// case of conformance, which a client cannot run (it cannot set the
// server's clock): a server whose store has a controlled clock escalates a
// message its client sent once its deadline passes by that clock, with
// nobody reading an inbox, and the client sees it as the
// message.escalated event of its subscription; the admin role gets the
// escalation, and escalating again through the client finds nothing due.
func TestServerEscalatesByItsOwnClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	// The server's clock runs an hour ahead of the client's.
	now := time.Now().UTC().Add(time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store, err := workspace.Open(ctx, sqliteDSN(t), workspace.Options{Clock: clock})
	require.NoError(t, err)
	srv, err := server.New(store, server.Options{EscalateEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	_, err = store.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact,
		Content: []byte("default_role = \"worker\"\n[roles.worker]\nnotes_read = [\"*\"]\nnotes_write = [\"*\"]\n[actors]\nroot = [\"admin\"]\n")})
	require.NoError(t, err)
	serveOn(t, ln, srv, srv.Drain)

	ws, err := workspace.Open(ctx, "http://"+ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "w"}, workspace.NotePut{Kind: "friction", Key: "hello", Body: "here"})
	require.NoError(t, err)
	lead := workspace.AsActor(ctx, "lead")
	_, err = ws.Messages().Send(lead, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"w"}, Body: "ack by noon",
		RequiresAck: true, Deadline: time.Now().Add(time.Minute)})
	require.ErrorIs(t, err, workspace.ErrInvalid, "a deadline is checked by the server's clock, not the client's")
	m, err := ws.Messages().Send(lead, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"w"}, Body: "ack by noon",
		RequiresAck: true, Deadline: clock().Add(time.Hour)})
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head,
		Types: []string{workspace.EventMessageEscalated}}})
	require.NoError(t, err)
	defer func() { _ = sub.Close() }()

	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	got, err := sub.Next(ctx)
	require.NoError(t, err, "the server escalated nothing")
	assert.Equal(t, m.ID, got.Event.Subject.ID)
	assert.Equal(t, "agentspace-server", got.Event.Actor)

	esc, err := ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	assert.Empty(t, esc, "escalated once: nothing is due any more")
	p, err := ws.Messages().Inbox(workspace.AsActor(ctx, "root"), workspace.InboxQuery{Actor: "root"})
	require.NoError(t, err)
	require.Len(t, p.Messages, 1, "the admin role got the escalation")
	assert.Equal(t, "escalation", p.Messages[0].Type)
	assert.Equal(t, m.Thread, p.Messages[0].Thread)
}
