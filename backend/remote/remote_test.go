package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/remote"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

func TestBatchErrorCarriesTheCallersOp(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, serve(t, sqliteDSN(t), false, server.Options{}))
	require.NoError(t, err)
	defer ws.Close()
	bad := workspace.UpdateArtifactOp{Ref: workspace.ByName("missing"), Change: workspace.ArtifactChange{Content: []byte("x")}}
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "a", Ops: []workspace.Op{
		workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}}, bad,
	}})
	var be *workspace.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 1, be.Index)
	assert.Equal(t, workspace.Op(bad), be.Op)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
}

func TestOpenChecksTheServerAndNeverShowsTheToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := serve(t, sqliteDSN(t), false, server.Options{})
	_, err := workspace.Open(ctx, url+"?ws_token=ast_aaaaaaaaaaaaaaaa_hunter2hunter2")
	require.ErrorIs(t, err, wire.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "hunter2")

	_, err = workspace.Open(ctx, "http+unix:///nonexistent/dir/s.sock")
	require.Error(t, err, "nothing listens there")

	_, err = workspace.Open(ctx, url+"?x=1")
	require.ErrorIs(t, err, workspace.ErrInvalid, "a server's DSN takes ws_ parameters only")
}

func TestExportAndImportSayTheyNeedTheStore(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, serve(t, sqliteDSN(t), true, server.Options{}))
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Export(ctx, nil, workspace.ArchiveOptions{})
	assert.ErrorIs(t, err, remote.ErrRemoteArchive)
	assert.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = ws.Import(ctx, nil, workspace.ArchiveOptions{})
	assert.ErrorIs(t, err, remote.ErrRemoteArchive)
}

// TestAPinIsRefusedNotDropped: the wire does not carry an op's Pin, so
// the client refuses it, naming the op, and nothing of the batch is
// written (dropping it would lose the pin that keeps the version).
func TestAPinIsRefusedNotDropped(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, serve(t, sqliteDSN(t), false, server.Options{}))
	require.NoError(t, err)
	defer ws.Close()
	for _, op := range []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "p", Content: []byte("x")}, Pin: true},
		workspace.UpdateArtifactOp{Ref: workspace.ByName("p"), Change: workspace.ArtifactChange{Content: []byte("y")}, Pin: true},
	} {
		_, err = ws.Commit(ctx, workspace.Batch{Actor: "a", Ops: []workspace.Op{
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}}, op,
		}})
		var be *workspace.BatchError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, 1, be.Index)
		assert.ErrorIs(t, err, workspace.ErrInvalid)
		_, err = ws.Notes().Get(ctx, "decision", "k")
		assert.ErrorIs(t, err, workspace.ErrNotFound, "nothing of the batch was written")
	}
}
