package conformance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

const (
	roleBatchWriter = "batch-writer"
	killCounter     = "kill/counter"
	killBatchOps    = 4
	killContentSize = 16 << 10
)

// RunKilledBatchWriters is the crash test for a backend whose store lives
// on this machine: kills times, a child process commits multi-op batches
// in a loop and is killed with SIGKILL at a random moment, mostly in the
// middle of one. Afterwards, reopened, the store holds every batch the
// child saw acknowledged, each batch entirely or not at all, the shared
// counter every batch bumps has one version per batch kept, and the log is
// contiguous with each batch's events next to each other.
//
// Call it from a top-level test of its own; the children re-execute that
// test, and RunKilledBatchWriters plays their part there:
//
//	func TestKilledBatchWriters(t *testing.T) { conformance.RunKilledBatchWriters(t, harness{}, 50) }
func RunKilledBatchWriters(t *testing.T, h Harness, kills int) {
	if os.Getenv(relChildEnv) != "" {
		runRelChild(t)
		return
	}
	ctx := caseCtx(t, 5*time.Minute)
	dsn, ws := fresh(t, h)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
		workspace.NewArtifact{Name: killCounter, Content: []byte("0")})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	var pattern strings.Builder
	for i, part := range strings.Split(t.Name(), "/") {
		if i > 0 {
			pattern.WriteString("/")
		}
		pattern.WriteString("^" + regexp.QuoteMeta(part) + "$")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)) // #nosec G404 G115 -- when to kill the child; the conversion only mixes bits
	acked := make([]int, kills)                                    // per round, how many batches were acknowledged
	for r := range kills {
		kid := startRelChild(t, ctx, pattern.String(), roleBatchWriter, fmt.Sprintf("writer-%d", r), dsn, strconv.Itoa(r), time.Minute)
		kid.expect(t, ctx, "ready")
		// Let it get a few batches in, then kill it wherever it is.
		for range rng.IntN(4) {
			kid.expect(t, ctx, "acked ")
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		require.NoError(t, kid.cmd.Process.Kill())
		<-kid.done
		kid.mu.Lock()
		out := kid.output.String()
		kid.mu.Unlock()
		acked[r] = strings.Count(out, relChildPrefix+" acked ")
	}

	checkKilledStore(t, ctx, open(t, dsn), acked)
}

// killName names op j of batch i of round r.
func killName(r, i, j int) string { return fmt.Sprintf("kill/r%d/b%d/%d", r, i, j) }

func killMessage(r, i int) string { return fmt.Sprintf("round %d batch %d", r, i) }

// checkKilledStore checks the reopened store against the acknowledgements.
func checkKilledStore(t *testing.T, ctx context.Context, ws *workspace.Workspace, acked []int) {
	t.Helper()
	kept := 0
	for r, n := range acked {
		// Batches run in order, so those kept are 0..m-1 with m >= n.
		for i := 0; ; i++ {
			present := 0
			for j := range killBatchOps - 1 {
				if _, err := ws.Artifacts().Get(ctx, workspace.ByName(killName(r, i, j))); err == nil {
					present++
				} else {
					require.ErrorIs(t, err, workspace.ErrNotFound)
				}
			}
			if present == 0 {
				assert.GreaterOrEqual(t, i, n, "round %d: acknowledged batch %d is lost", r, i)
				break
			}
			assert.Equal(t, killBatchOps-1, present, "round %d: batch %d is half there", r, i)
			kept++
		}
	}
	c, err := ws.Artifacts().Get(ctx, workspace.ByName(killCounter))
	require.NoError(t, err)
	assert.Equal(t, int64(1+kept), c.Version, "the counter has one version per batch kept")

	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	checkLogContiguous(t, ctx, ws, head)
	// Each batch's events are killBatchOps consecutive seqs.
	runs := map[string][]int64{}
	for ev := range readAllEvents(t, ctx, ws) {
		if strings.HasPrefix(ev.Message, "round ") {
			runs[ev.Message] = append(runs[ev.Message], ev.Seq)
		}
	}
	assert.Len(t, runs, kept, "batches in the log")
	for msg, seqs := range runs {
		if assert.Len(t, seqs, killBatchOps, "%s: events", msg) {
			assert.Equal(t, seqs[0]+killBatchOps-1, seqs[killBatchOps-1], "%s: events are consecutive", msg)
		}
	}
	total := 0
	for _, n := range acked {
		total += n
	}
	t.Logf("%d kills: %d batches acknowledged, %d kept, %d events", len(acked), total, kept, head)
}

// batchWriterChild commits batches for round arg until it is killed: each
// creates killBatchOps-1 artifacts and bumps the shared counter.
func batchWriterChild(t *testing.T, dsn, arg string, say func(string, ...any)) {
	r, err := strconv.Atoi(arg)
	require.NoError(t, err)
	ctx := testCtx(t)
	ws := open(t, dsn)
	say("ready")
	content := bytes.Repeat([]byte("x"), killContentSize)
	for i := 0; ; i++ {
		msg := killMessage(r, i)
		ops := make([]workspace.Op, 0, killBatchOps)
		for j := range killBatchOps - 1 {
			ops = append(ops, workspace.CreateArtifactOp{
				Artifact: workspace.NewArtifact{Name: killName(r, i, j), Content: content}, Message: msg})
		}
		ops = append(ops, workspace.UpdateArtifactOp{Ref: workspace.ByName(killCounter),
			Change: workspace.ArtifactChange{Content: []byte(msg)}, Cond: workspace.Cond{Message: msg}})
		_, err := ws.Commit(ctx, workspace.Batch{Actor: "writer", Ops: ops})
		require.NoError(t, err, "batch %d", i)
		say("acked %d", i)
	}
}
