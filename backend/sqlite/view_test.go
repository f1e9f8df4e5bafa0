package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// viewOnly hides the store's HintedViewer: every read is a plain View.
type viewOnly struct{ workspace.Store }

// countedViews counts the store's plain Views.
type countedViews struct {
	*store
	views int
}

func (c *countedViews) View(ctx context.Context, fn func(tx workspace.ReadTx) error) error {
	c.views++
	return c.store.View(ctx, fn)
}

// A Get of an artifact's head is one statement, no transaction, and
// returns what a Get in a View returns: by name or ID, with empty
// content, not found, deleted; a Get of an older version is a View.
func TestGetOfAHeadIsOneStatementAndReadsWhatAViewReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	st := openStore(t, dsn)
	ws := workspace.New(st, workspace.Options{})
	plain := workspace.New(viewOnly{openStore(t, dsn)}, workspace.Options{})
	w := workspace.Write{Actor: "ann"}
	a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("v1"), Labels: map[string]string{"x": "y"}})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: "plans/a.md"}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "empty", Content: []byte{}})
	require.NoError(t, err)
	gone, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "gone", Content: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, ws.Artifacts().Delete(ctx, w, workspace.ArtifactRef{Name: "gone"}))

	refs := []workspace.ArtifactRef{
		{Name: "plans/a.md"}, {ID: a.ID}, {ID: a.ID, Version: 1}, {Name: "plans/a.md", Version: 2},
		{Name: "empty"}, {Name: "missing"}, {Name: "gone"}, {ID: gone.ID},
	}
	for _, ref := range refs {
		t.Run(fmt.Sprintf("%+v", ref), func(t *testing.T) {
			want, wantErr := plain.Artifacts().Get(ctx, ref)
			got, err := ws.Artifacts().Get(ctx, ref)
			assert.Equal(t, want, got)
			if wantErr != nil {
				assert.ErrorIs(t, err, workspace.ErrNotFound)
				assert.Equal(t, wantErr.Error(), err.Error())
			} else {
				assert.NoError(t, err)
			}
		})
	}

	counted := &countedViews{store: st}
	cws := workspace.New(counted, workspace.Options{})
	got, err := cws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "plans/a.md"})
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got.Content))
	assert.Zero(t, counted.views, "a Get of the head runs no View")
	_, err = cws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "plans/a.md", Version: 1})
	require.NoError(t, err)
	assert.Equal(t, 1, counted.views, "a Get of a version does")
}

// Gets of the head while a writer on another handle updates it read one
// snapshot: the content is always the one of the version they return.
func TestGetOfAHeadReadsOneSnapshotUnderWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	writer := workspace.New(openStore(t, dsn), workspace.Options{})
	reader := workspace.New(openStore(t, dsn), workspace.Options{})
	w := workspace.Write{Actor: "ann"}
	_, err := writer.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "hot", Content: []byte("1")})
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 2; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := writer.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: "hot"}, workspace.ArtifactChange{Content: []byte(strconv.Itoa(v))})
			if !assert.NoError(t, err) {
				return
			}
		}
	}()
	for range 500 {
		a, err := reader.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "hot"})
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(a.Version, 10), string(a.Content), "content of the version returned")
	}
	close(stop)
	wg.Wait()
}
