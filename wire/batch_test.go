package wire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestEveryOpCodeDecodesToItsOp: each op code the API documents stands for
// its workspace op type, and any other code is an *InvalidError naming op.
func TestEveryOpCodeDecodesToItsOp(t *testing.T) {
	for code, want := range map[string]workspace.Op{
		wire.OpCreateArtifact:   workspace.CreateArtifactOp{},
		wire.OpUpdateArtifact:   workspace.UpdateArtifactOp{},
		wire.OpDeleteArtifact:   workspace.DeleteArtifactOp{},
		wire.OpRollbackArtifact: workspace.RollbackArtifactOp{},
		wire.OpCreateTask:       workspace.CreateTaskOp{},
		wire.OpUpdateTask:       workspace.UpdateTaskOp{},
		wire.OpPutNote:          workspace.PutNoteOp{},
		wire.OpDeleteNote:       workspace.DeleteNoteOp{},
		wire.OpReleaseLock:      workspace.ReleaseLockOp{},
		wire.OpStopActor:        workspace.StopActorOp{},
	} {
		op, err := wire.OpBody{Op: code}.WorkspaceOp()
		require.NoError(t, err, code)
		assert.IsType(t, want, op, code)
	}
	_, err := wire.OpBody{Op: "drop_table"}.WorkspaceOp()
	var ie *workspace.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "op", ie.Field)
}

// TestContentSurvivesTheWire: bytes put on the wire as text or base64
// decode to the same bytes, and absent content stays absent.
func TestContentSurvivesTheWire(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("plain text"), {0, 1, 2, 0xff}, []byte("é\x00")} {
		c := wire.ContentOf(b)
		got, err := c.Bytes()
		require.NoError(t, err)
		assert.Equal(t, b, got)
	}
	assert.Empty(t, wire.ContentOf([]byte("x")).ContentEncoding)
	assert.Equal(t, "base64", wire.ContentOf([]byte{0xff}).ContentEncoding)
}
