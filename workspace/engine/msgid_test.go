package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

func TestSuccessorV7CountsUpAndCarries(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"01a235c8-f484-76ba-a3bc-056b3fb3cbc6", "01a235c8-f484-76ba-a3bc-056b3fb3cbc7"},
		{"01a235c8-f484-76ba-bfff-ffffffffffff", "01a235c8-f484-76bb-8000-000000000000"},
		{"01a235c8-f484-7fff-bfff-ffffffffffff", "01a235c8-f485-7000-8000-000000000000"},
	} {
		got := engine.SuccessorV7(uuid.MustParse(c.in))
		assert.Equal(t, c.want, got.String(), c.in)
		assert.Equal(t, uuid.Version(7), got.Version())
		assert.Equal(t, uuid.RFC4122, got.Variant())
		assert.Greater(t, got.String(), c.in)
	}
}

// TestMessageIDsFollowCommitOrderWhateverTheClock: a server whose clock
// ran an hour ahead gave the last message's id; the next message, sent
// through a server with the right clock, still gets an id above it, so a
// reader whose inbox page or read cursor is past the first sees the
// second.
func TestMessageIDsFollowCommitOrderWhateverTheClock(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "bob"}, workspace.NewArtifact{Name: "bob.txt", Content: []byte("bob")})
	require.NoError(t, err)
	first, err := ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Body: "one"})
	require.NoError(t, err)
	// An id from an hour ahead: the timestamp's 48 bits plus 3,600,000 ms.
	future := uuid.MustParse(first.ID)
	ms := int64(future[0])<<40 | int64(future[1])<<32 | int64(future[2])<<24 | int64(future[3])<<16 | int64(future[4])<<8 | int64(future[5])
	ms += 3_600_000
	for i := range 6 {
		future[i] = byte(ms >> (40 - 8*i))
	}
	require.NoError(t, engine.PlantLastMessageID(ctx, ws, future.String()))
	require.NoError(t, ws.Messages().MarkRead(ctx, "bob", first.ID))

	second, err := ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Body: "two"})
	require.NoError(t, err)
	assert.Greater(t, second.ID, future.String())
	unread, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: "bob", Unread: true})
	require.NoError(t, err)
	require.Len(t, unread.Messages, 1)
	assert.Equal(t, "two", unread.Messages[0].Body)
	after, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: "bob", After: first.ID})
	require.NoError(t, err)
	require.Len(t, after.Messages, 1)
	assert.Equal(t, second.ID, after.Messages[0].ID)
}
