package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// viewOnly hides a store's optional read paths (HintedViewer): every read
// is a plain View.
type viewOnly struct{ driver.Store }

// plainHandle opens a handle on a store of its own on dsn whose reads are
// all plain Views, closed with t.Cleanup.
func plainHandle(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	p.Config.Logger, p.Config.PollInterval = slog.Default(), workspace.DefaultPollInterval
	st, err := engine.OpenStore(context.Background(), p)
	require.NoError(t, err)
	ws := engine.New(viewOnly{st}, workspace.Options{})
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// testGetReadsWhatAViewReads: a Get, which a store may answer without a
// transaction (HintedViewer), returns exactly what a Get in a plain View
// returns, errors included: by name, by ID, an older version, empty
// content, a missing name, a deleted artifact.
func testGetReadsWhatAViewReads(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	plain := plainHandle(t, dsn)
	w := as("ann")
	a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("v1"), Labels: map[string]string{"x": "y"}})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: "plans/a.md"}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "empty", Content: []byte{}})
	require.NoError(t, err)
	gone, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "gone", Content: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, ws.Artifacts().Delete(ctx, w, workspace.ArtifactRef{Name: "gone"}))

	for _, ref := range []workspace.ArtifactRef{
		{Name: "plans/a.md"}, {ID: a.ID}, {ID: a.ID, Version: 1}, {Name: "plans/a.md", Version: 2},
		{Name: "empty"}, {Name: "missing"}, {Name: "gone"}, {ID: gone.ID},
	} {
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
}

// testRecordGetsReadWhatAViewReads: the Gets of a note, a task and a lock,
// which a store may answer with one statement outside a transaction
// (HintedViewer), return exactly what they return in a plain View, errors
// included: found, missing, deleted, released.
func testRecordGetsReadWhatAViewReads(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	plain := plainHandle(t, dsn)
	w := as("ann")
	_, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "db", Title: "DB", Body: "postgres"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "gone", Body: "x"})
	require.NoError(t, err)
	require.NoError(t, ws.Notes().Delete(ctx, w, "decision", "gone"))
	task, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t", Labels: map[string]string{"a": "b"}})
	require.NoError(t, err)
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, task.ID, claimed.ID)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "ann", TTL: time.Hour})
	require.NoError(t, err)
	l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:old", Owner: "ann", TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l))

	same := func(t *testing.T, want, got any, wantErr, err error) {
		t.Helper()
		assert.Equal(t, want, got)
		if wantErr != nil {
			assert.ErrorIs(t, err, workspace.ErrNotFound)
			assert.Equal(t, wantErr.Error(), err.Error())
		} else {
			assert.NoError(t, err)
		}
	}
	for _, key := range []string{"db", "gone", "missing"} {
		want, wantErr := plain.Notes().Get(ctx, "decision", key)
		got, err := ws.Notes().Get(ctx, "decision", key)
		same(t, want, got, wantErr, err)
	}
	for _, id := range []string{task.ID, "01900000-0000-7000-8000-000000000000"} {
		want, wantErr := plain.Tasks().Get(ctx, id)
		got, err := ws.Tasks().Get(ctx, id)
		same(t, want, got, wantErr, err)
	}
	for _, resource := range []string{"role:lead", "role:old", "role:none"} {
		want, wantErr := plain.Locks().Get(ctx, resource)
		got, err := ws.Locks().Get(ctx, resource)
		same(t, want, got, wantErr, err)
	}
}

// testGetsUnderWritesReadOneSnapshot: Gets of an artifact's head while a
// writer on another handle updates it (40 versions at least) always return
// the content of the version they return.
func testGetsUnderWritesReadOneSnapshot(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, writer := fresh(t, h)
	reader := open(t, dsn)
	w := as("ann")
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
	defer wg.Wait()
	defer close(stop)
	// Read until the writer has written 40 versions meanwhile.
	for reads := 1; ; reads++ {
		a, err := reader.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "hot"})
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(a.Version, 10), string(a.Content), "the content of the version returned")
		if a.Version >= 40 && reads >= 100 {
			return
		}
	}
}
