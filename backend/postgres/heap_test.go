package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestBackendsKeepTheirHeap runs grouped artifact writes through a store
// whose pool this package opened, and through one on a pool of the
// test's own (OpenPool leaves it as it is), and watches the heap of each
// pool's server processes in /proc while they write: a backend of the
// store's pool never gives its heap back (see keepHeap); a plain pool's,
// under glibc's defaults, shrinks its heap after a statement and grows it
// again on the next. It needs the server's processes on this machine.
func TestBackendsKeepTheirHeap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := pgtest.NewDSN(t)
	admin := pgtest.Connect(t)

	// heapEnds reads where the heap of each backend named app ends.
	heapEnds := func(app string) map[int]uint64 {
		rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		require.NoError(t, err)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.NotEmpty(t, pids)
		ends := make(map[int]uint64, len(pids))
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
			if err != nil {
				t.Skipf("the server's processes are not readable here (%v): it runs elsewhere", err)
			}
			for line := range strings.Lines(string(b)) {
				if !strings.Contains(line, "[heap]") {
					continue
				}
				span, _, _ := strings.Cut(line, " ")
				_, end, _ := strings.Cut(span, "-")
				n, err := strconv.ParseUint(end, 16, 64)
				require.NoError(t, err)
				ends[pid] = n
			}
		}
		return ends
	}
	// shrinks counts the times a backend's heap was seen smaller than
	// before while 16 writers made 1,600 writes, after 320 to warm up.
	shrinks := func(ws *workspace.Workspace, app, prefix string) int {
		const writers = 16
		versions := make([]int64, writers)
		for w := range writers {
			a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "t"}, workspace.NewArtifact{
				Name: fmt.Sprintf("%s/%d", prefix, w), Kind: "output", Content: make([]byte, 1024)})
			require.NoError(t, err)
			versions[w] = a.Version
		}
		run := func(each int) {
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for range each {
						a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "t", IfVersion: versions[w]},
							workspace.ArtifactRef{Name: fmt.Sprintf("%s/%d", prefix, w)}, workspace.ArtifactChange{Content: make([]byte, 1024)})
						if err != nil {
							t.Error(err)
							return
						}
						versions[w] = a.Version
					}
				})
			}
			wg.Wait()
		}
		run(20)
		done := make(chan struct{})
		go func() { defer close(done); run(100) }()
		last, n := heapEnds(app), 0
		for {
			select {
			case <-done:
				return n
			case <-time.After(500 * time.Microsecond):
			}
			for pid, end := range heapEnds(app) {
				if end < last[pid] {
					n++
				}
				last[pid] = end
			}
		}
	}

	// The store's connections run keepHeap on their first take here, not
	// their 64th (TestAConnectionKeepsItsHeapFromItsSixtyFourthTake checks
	// which): how many takes the warm-up makes depends on how the
	// machine's load groups the writes.
	defer postgres.SetKeepHeapAfter(1)()
	ours := pgtest.RandomName("heap_ours_")
	ws, err := workspace.Open(ctx, pgtest.WithParams(t, base, "application_name", ours))
	require.NoError(t, err)
	defer ws.Close()
	kept := shrinks(ws, ours, "ours")

	theirs := pgtest.RandomName("heap_theirs_")
	pcfg, err := pgxpool.ParseConfig(pgtest.WithParams(t, pgtest.ServerDSN(t), "application_name", theirs))
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	defer pool.Close()
	plain, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: pgtest.SchemaOf(t, base)}, workspace.Options{})
	require.NoError(t, err)
	defer plain.Close()
	given := shrinks(plain, theirs, "theirs")

	t.Logf("heaps seen shrinking over 1,600 writes: %d with the store's pool, %d with a plain one", kept, given)
	require.Zero(t, kept, "the store's backends should never give their heap back")
	if given == 0 {
		t.Log("a plain pool's backends kept their heap here too: this server's malloc is not glibc's, or its trim threshold is set")
	}
}

// TestAConnectionKeepsItsHeapFromItsSixtyFourthTake: the store's pools
// run keepHeap once per connection, on its 64th take from the pool and on
// no other: a connection that serves a one-shot command never pays the
// 1 MiB's page faults. The backend's last statement (pg_stat_activity)
// tells which take ran it.
func TestAConnectionKeepsItsHeapFromItsSixtyFourthTake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pgtest.Connect(t)
	conn, err := pgx.Connect(ctx, pgtest.ServerDSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	last := func() string {
		var q string
		require.NoError(t, admin.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`, conn.PgConn().PID()).Scan(&q))
		return q
	}
	require.EqualValues(t, 64, postgres.KeepHeapAfter())
	for take := int64(1); take <= postgres.KeepHeapAfter()+8; take++ {
		ok, err := postgres.PrepareConn(ctx, conn)
		require.NoError(t, err)
		require.True(t, ok, "take %d", take)
		if take == postgres.KeepHeapAfter() {
			require.Equal(t, postgres.KeepHeap, last(), "take %d runs it", take)
		} else {
			require.NotEqual(t, postgres.KeepHeap, last(), "take %d does not", take)
		}
		marker := fmt.Sprintf("SELECT %d", take)
		_, err = conn.Exec(ctx, marker)
		require.NoError(t, err)
	}
}
