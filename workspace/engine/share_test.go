package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

func openT(t *testing.T, dsn string, opts ...workspace.Options) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func TestOpenSharesAStorePerDSNAndOptions(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	a, b := openT(t, dsn), openT(t, dsn)
	assert.True(t, engine.SameStore(a, b), "two opens of one DSN")

	for name, other := range map[string]*workspace.Workspace{
		"ws_private=true":       openT(t, dsn+"?ws_private=true"),
		"Options.Private":       openT(t, dsn, workspace.Options{Private: true}),
		"another option":        openT(t, dsn, workspace.Options{MaxArtifactSize: 1 << 20}),
		"another poll interval": openT(t, dsn+"?ws_poll=10ms"),
		"another file":          openT(t, "sqlite:"+filepath.Join(dir, "other.db")),
	} {
		assert.False(t, engine.SameStore(a, other), name)
	}

	// A private handle still sees the shared one's writes: it is the same
	// database, through a store of its own.
	p := openT(t, dsn+"?ws_private=true")
	ctx := context.Background()
	_, err := a.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "x", Content: []byte("1")})
	require.NoError(t, err)
	got, err := p.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, []byte("1"), got.Content)
}

func TestOpenDoesNotShareARelativePathAcrossAChdir(t *testing.T) {
	one, two := t.TempDir(), t.TempDir()
	t.Chdir(one)
	a := openT(t, "sqlite:ws.db")
	t.Chdir(two)
	b := openT(t, "sqlite:ws.db")
	assert.False(t, engine.SameStore(a, b))
}

func TestTheLastCloseClosesTheSharedStore(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	before := engine.SharedStores()
	a, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	b, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	assert.Equal(t, before+1, engine.SharedStores())
	require.NoError(t, a.Close())
	assert.Equal(t, before+1, engine.SharedStores(), "b still holds the store")
	require.NoError(t, b.Close())
	assert.Equal(t, before, engine.SharedStores(), "the last close lets the store go")

	c := openT(t, dsn)
	assert.False(t, engine.SameStore(b, c), "a new store after the last close")
}

func TestOpenFailuresAreNotShared(t *testing.T) {
	before := engine.SharedStores()
	// A regular file where the database's directory should be.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	dsn := "sqlite:" + filepath.Join(file, "ws.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := workspace.Open(context.Background(), dsn)
			if assert.Error(t, err) {
				return
			}
			_ = ws.Close()
		}()
	}
	wg.Wait()
	assert.Equal(t, before, engine.SharedStores(), "a failed open leaves nothing registered")
}

func TestAttach(t *testing.T) {
	ctx := context.Background()
	a := openT(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db")+"?ws_private=true")
	b, err := a.Attach()
	require.NoError(t, err)
	assert.True(t, engine.SameStore(a, b))
	require.NoError(t, a.Close())
	_, err = a.Attach()
	assert.ErrorIs(t, err, workspace.ErrClosed, "attaching to a closed handle")
	_, err = b.Artifacts().Create(ctx, workspace.Write{Actor: "b"}, workspace.NewArtifact{Name: "x", Content: []byte("1")})
	require.NoError(t, err, "the attached handle outlives the first")
	require.NoError(t, b.Close())
	_, err = b.Events().Head(ctx)
	assert.ErrorIs(t, err, workspace.ErrClosed)
}

var gatedRuns atomic.Int64

// gatedDriver is the sqlite driver whose first Open waits for its ctx to
// end and fails with it, as a slow server would for an opener that gives up.
type gatedDriver struct {
	driver.Driver
	entered chan struct{}
	once    sync.Once
}

func (d *gatedDriver) Open(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	first := false
	d.once.Do(func() { first = true })
	if first {
		close(d.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return d.Driver.Open(ctx, cfg)
}

func TestAWaiterOpensTheStoreWhenTheFirstOpenerGivesUp(t *testing.T) {
	d := &gatedDriver{Driver: sqlite.Driver{}, entered: make(chan struct{})}
	// Schemes cannot be unregistered: a new one per run (go test -count).
	scheme := fmt.Sprintf("gated%d", gatedRuns.Add(1))
	driver.Register(scheme, engine.Backend(d))
	dsn := scheme + ":" + filepath.Join(t.TempDir(), "ws.db")

	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := workspace.Open(first, dsn)
		firstErr <- err
	}()
	<-d.entered
	// A second opener waits for the first one's open of the shared store.
	second := make(chan error, 1)
	var ws *workspace.Workspace
	go func() {
		var err error
		ws, err = workspace.Open(context.Background(), dsn)
		second <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-firstErr, context.Canceled)
	require.NoError(t, <-second, "the waiter, whose ctx is live, opens the store itself")
	defer ws.Close()
	_, err := ws.Events().Head(context.Background())
	assert.NoError(t, err)
}
