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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestBackendsKeepTheirHeap runs grouped artifact writes through a store
// whose pool this package opened, and through one on a pool of the
// test's own (OpenPool leaves it as it is), and counts the page faults
// of each pool's server processes: a backend that gives its heap back to
// the kernel after a statement faults it in again on the next (see
// keepHeap). It needs the server's processes on this machine, readable
// in /proc.
func TestBackendsKeepTheirHeap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := pgtest.NewDSN(t)
	admin := pgtest.Connect(t)

	// faults sums the minor page faults of the backends named app.
	faults := func(app string) int64 {
		rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		require.NoError(t, err)
		var pids []int
		for rows.Next() {
			var pid int
			require.NoError(t, rows.Scan(&pid))
			pids = append(pids, pid)
		}
		require.NoError(t, rows.Err())
		require.NotEmpty(t, pids)
		var sum int64
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				t.Skipf("the server's processes are not readable here (%v): it runs elsewhere", err)
			}
			_, after, _ := strings.Cut(string(b), ") ")
			f := strings.Fields(after)
			n, err := strconv.ParseInt(f[7], 10, 64) // minflt, the stat file's tenth field
			require.NoError(t, err)
			sum += n
		}
		return sum
	}
	// perWrite is the faults per write of 16 writers over 1,600 writes,
	// after 320 to warm up.
	perWrite := func(ws *workspace.Workspace, app, prefix string) float64 {
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
		f0 := faults(app)
		run(100)
		return float64(faults(app)-f0) / (writers * 100)
	}

	ours := pgtest.RandomName("heap_ours_")
	ws, err := workspace.Open(ctx, pgtest.WithParams(t, base, "application_name", ours))
	require.NoError(t, err)
	defer ws.Close()
	kept := perWrite(ws, ours, "ours")

	theirs := pgtest.RandomName("heap_theirs_")
	pcfg, err := pgxpool.ParseConfig(pgtest.WithParams(t, pgtest.ServerDSN(t), "application_name", theirs))
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	defer pool.Close()
	plain, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: pgtest.SchemaOf(t, base)}, workspace.Options{})
	require.NoError(t, err)
	defer plain.Close()
	given := perWrite(plain, theirs, "theirs")

	t.Logf("page faults per write: %.2f with the store's pool, %.2f with a plain one", kept, given)
	if given < 0.2 {
		t.Skipf("this server's backends kept their heap without help (%.2f faults per write): its malloc is not glibc's, or its trim threshold is set", given)
	}
	// The rest of the faults are the shared buffers a backend touches
	// first (about 0.3 per write here); a plain pool's backends add the
	// heap they give back and fault in again (0.57-0.66 against
	// 0.30-0.34, five runs).
	require.Less(t, kept, given*0.75, "the store's backends should not give their heap back between statements")
}
