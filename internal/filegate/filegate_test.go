package filegate

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOneGatePerFileCountedByItsUsers(t *testing.T) {
	dir := t.TempDir()
	a := Open(filepath.Join(dir, "ws.db"))
	b := Open(filepath.Join(dir, ".", "x", "..", "ws.db"))
	assert.Same(t, a, b, "one file, one gate, however it is spelt")
	other := Open(filepath.Join(dir, "other.db"))
	assert.NotSame(t, a, other)
	other.Close()
	a.Close()
	c := Open(filepath.Join(dir, "ws.db"))
	assert.Same(t, a, c, "still used once")
	c.Close()
	b.Close()
	gates.Lock()
	defer gates.Unlock()
	assert.Empty(t, gates.m, "the last Close forgets the gate")
}

func TestARelativePathIsKeyedByTheDirectoryItWasOpenedIn(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	g := Open("ws.db")
	defer g.Close()
	same := Open(filepath.Join(dir, "ws.db"))
	defer same.Close()
	assert.Same(t, g, same)
	t.Chdir(t.TempDir())
	other := Open("ws.db")
	defer other.Close()
	assert.NotSame(t, g, other, "another directory's ws.db")
}

func TestWritersGoThroughOneAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.db")
	ctx := context.Background()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// Each writer opens the gate as a handle of its own would.
			g := Open(path)
			defer g.Close()
			for range 200 {
				if !assert.NoError(t, g.Enter(ctx)) {
					return
				}
				n := inside.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				runtime.Gosched()
				inside.Add(-1)
				g.Leave()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "writers inside the gate at once")
}

func TestAWaiterGivesUpWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.db")
	g := Open(path)
	defer g.Close()
	require.NoError(t, g.Enter(context.Background()))
	defer g.Leave()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, g.Enter(ctx), context.Canceled)
}

func TestANilGateLetsEveryoneThrough(t *testing.T) {
	var g *Gate
	require.NoError(t, g.Enter(context.Background()))
	require.NoError(t, g.Enter(context.Background()))
	g.Leave()
}
