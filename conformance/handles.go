package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testHandlesCloseOnTheirOwn: closing one of two handles on a store ends
// that handle's subscription and its lock wait with ErrClosed and refuses
// its calls, while the other handle goes on writing, waiting and
// receiving. Handles opened and closed concurrently, while others write,
// lose no write; the store opens again after every handle has closed.
func testHandlesCloseOnTheirOwn(t *testing.T, h Harness) {
	ctx := caseCtx(t, 90*time.Second)
	dsn := h.NewDSN(t)
	a, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b := open(t, dsn)

	head, err := b.Events().Head(ctx)
	require.NoError(t, err)
	subA, err := a.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
	require.NoError(t, err)
	defer subA.Close()
	subB, err := b.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
	require.NoError(t, err)
	defer subB.Close()

	const resource = "artifact:handles/held"
	held, err := b.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: resource, Owner: "b", TTL: time.Minute})
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: resource, Owner: "a", TTL: time.Minute, Wait: true})
		waited <- err
	}()
	// The acquire is refused once before it waits; give it time to be waiting.
	time.Sleep(50 * time.Millisecond)

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "a second Close")
	select {
	case err := <-waited:
		assert.ErrorIs(t, err, workspace.ErrClosed, "the closed handle's lock wait")
	case <-ctx.Done():
		t.Fatal("the closed handle's lock wait did not end")
	}
	for range subA.C() {
		// Events committed before the close may still come; then it ends.
	}
	assert.ErrorIs(t, subA.Err(), workspace.ErrClosed, "the closed handle's subscription")
	_, err = a.Artifacts().Create(ctx, as("a"), workspace.NewArtifact{Name: "handles/late", Content: []byte("x")})
	assert.ErrorIs(t, err, workspace.ErrClosed, "a write on the closed handle")
	_, err = a.Events().Head(ctx)
	assert.ErrorIs(t, err, workspace.ErrClosed, "a read on the closed handle")

	// The other handle is untouched: it writes, its subscriber receives,
	// and its waiter is woken by a release.
	art, err := b.Artifacts().Create(ctx, as("b"), workspace.NewArtifact{Name: "handles/after", Content: []byte("y")})
	require.NoError(t, err)
	for {
		m, err := subB.Next(ctx)
		require.NoError(t, err, "the open handle's subscription")
		if !m.Progress && m.Event.Subject.Name == art.Name {
			break
		}
	}
	c := open(t, dsn)
	got := make(chan error, 1)
	go func() {
		_, err := c.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: resource, Owner: "c", TTL: time.Minute, Wait: true})
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, b.Locks().Release(ctx, held))
	select {
	case err := <-got:
		require.NoError(t, err, "a waiter on a handle opened after the close")
	case <-ctx.Done():
		t.Fatal("the waiter was not woken by the release")
	}

	// Handles come and go while others write through them.
	const (
		workers = 4
		rounds  = 8
	)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				err := func() error {
					ws, err := workspace.Open(ctx, dsn)
					if err != nil {
						return err
					}
					defer ws.Close()
					_, err = ws.Artifacts().Create(ctx, as("churn"), workspace.NewArtifact{
						Name: fmt.Sprintf("handles/churn-%d-%d", w, r), Content: []byte("z"),
					})
					return err
				}()
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	page, err := b.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: "handles/churn-", Limit: 100})
	require.NoError(t, err)
	assert.Len(t, page.Artifacts, workers*rounds, "every churned handle's write")

	// Once every handle is closed the store opens again, with everything in it.
	require.NoError(t, subB.Close())
	require.NoError(t, b.Close())
	require.NoError(t, c.Close())
	d := open(t, dsn)
	got2, err := d.Artifacts().Get(context.WithoutCancel(ctx), workspace.ArtifactRef{Name: "handles/after"})
	require.NoError(t, err)
	assert.Equal(t, []byte("y"), got2.Content)
	if _, err := b.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "handles/after"}); !errors.Is(err, workspace.ErrClosed) {
		t.Errorf("a closed handle's read after the store reopened: %v, want ErrClosed", err)
	}
}
