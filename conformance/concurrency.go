package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// runConcurrency runs the cases with many handles, goroutines and
// processes, and the model-based test. Each case opens several handles on
// one fresh store, to play several agents.
func runConcurrency(t *testing.T, h Harness) {
	for _, mode := range []struct {
		name string
		h    Harness
	}{{"SeparateStores", private{h}}, {"SharedStore", h}} {
		h := mode.h
		t.Run(mode.name, func(t *testing.T) {
			t.Run("ConcurrentIfVersionWritersHaveExactlyOneWinner", func(t *testing.T) { testIfVersionOneWinner(t, h) })
			t.Run("ConcurrentIncrementsWithRetryLoseNoUpdate", func(t *testing.T) { testIncrementNoLostUpdate(t, h) })
			t.Run("ConcurrentClaimersTakeEveryTaskOnceInDependencyOrder", func(t *testing.T) { testConcurrentClaims(t, h) })
			t.Run("ContendedLockHasOneHolderAndIncreasingTokens", func(t *testing.T) { testLockHandOvers(t, h) })
			t.Run("SubscribersSeeEveryEventOnceWhileHandlesWrite", func(t *testing.T) { testSubscribersUnderWrites(t, h) })
			t.Run("HandlesCloseOnTheirOwn", func(t *testing.T) { testHandlesCloseOnTheirOwn(t, h) })
			t.Run("GetsUnderWritesReadOneSnapshot", func(t *testing.T) { testGetsUnderWritesReadOneSnapshot(t, h) })
			t.Run("WritersGivingUpLeaveTheirGroupIntact", func(t *testing.T) { testGivingUpLeavesOthersIntact(t, h) })
			t.Run("InboxWaitersEachGetTheirOwnMessage", func(t *testing.T) { testInboxWaitersEachGetTheirOwn(t, h) })
		})
	}
	t.Run("ChildProcessesLoseNoUpdateAndDoubleClaimNothing", func(t *testing.T) { testProcesses(t, h) })
	t.Run("KilledProcessBlocksNobodyLongerThanItsLeases", func(t *testing.T) { testKilledProcess(t, h) })
	t.Run("KilledSenderLosesNoSentMessage", func(t *testing.T) { testKilledSenderLosesNothing(t, h) })
	t.Run("RacingAckerProcessesRecordOneAck", func(t *testing.T) { testRacingAckersRecordOne(t, h) })
	t.Run("InboxWaitersWokenByAChildProcess", func(t *testing.T) { testInboxWaitersWokenByAChild(t, h) })
	t.Run("RandomOperationsMatchTheModel", func(t *testing.T) { testModel(t, private{h}) })
}

// handles opens n handles on dsn (closed with t.Cleanup).
func handles(t testing.TB, dsn string, n int) []*workspace.Workspace {
	t.Helper()
	out := make([]*workspace.Workspace, n)
	for i := range out {
		out[i] = open(t, dsn)
	}
	return out
}

// asConflict returns err's *ConflictError, if it has one.
func asConflict(err error) (*workspace.ConflictError, bool) {
	var ce *workspace.ConflictError
	ok := errors.As(err, &ce)
	return ce, ok
}

// testIfVersionOneWinner: N writers over several handles send the same
// IfVersion at once; exactly one wins, every loser gets a *ConflictError
// carrying the winner's version, and each loss is one conflict event.
func testIfVersionOneWinner(t *testing.T, h Harness) {
	const writers = 12
	ctx := testCtx(t)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 3)
	a, err := hs[0].Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
		workspace.NewArtifact{Name: "plans/race.md", Kind: "plan", Content: []byte("v1")})
	require.NoError(t, err)
	head0, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)

	start := make(chan struct{})
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w := workspace.Write{Actor: fmt.Sprintf("writer-%d", i), IfVersion: 1}
			_, errs[i] = hs[i%len(hs)].Artifacts().Update(ctx, w, workspace.ByName("plans/race.md"),
				workspace.ArtifactChange{Content: []byte(fmt.Sprintf("writer %d", i))})
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "writers %d and %d both won with IfVersion 1", winner, i)
			winner = i
			continue
		}
		ce, ok := asConflict(err)
		if assert.True(t, ok, "writer %d: want a *ConflictError, got %v", i, err) {
			assert.ErrorIs(t, err, workspace.ErrConflict)
			assert.Equal(t, int64(1), ce.Expected, "writer %d: expected version", i)
			assert.Equal(t, int64(2), ce.Current, "writer %d: current version", i)
			assert.Equal(t, a.ID, ce.Subject.ID, "writer %d: conflict subject", i)
		}
	}
	require.NotEqual(t, -1, winner, "no writer won")

	got, err := hs[1].Artifacts().Get(ctx, workspace.ByName("plans/race.md"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Version)
	assert.Equal(t, fmt.Sprintf("writer %d", winner), string(got.Content))

	evs := readAll(t, hs[2], workspace.EventQuery{AfterSeq: head0})
	var updates, conflicts int
	for _, ev := range evs {
		switch ev.Type {
		case workspace.EventArtifactUpdated:
			updates++
			assert.Equal(t, fmt.Sprintf("writer-%d", winner), ev.Actor)
		case workspace.EventConflict:
			conflicts++
			assert.Equal(t, a.ID, ev.Subject.ID)
			assert.Equal(t, int64(2), ev.Version, "a conflict event carries the current version")
			assert.NotEqual(t, fmt.Sprintf("writer-%d", winner), ev.Actor, "the winner has no conflict event")
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	assert.Equal(t, 1, updates, "one artifact.updated event")
	assert.Equal(t, writers-1, conflicts, "one conflict event per loser")
}

// testIncrementNoLostUpdate: G goroutines over H handles each add 1 K times
// with read-modify-write under IfVersion, retrying on conflict. Every
// increment lands exactly once.
func testIncrementNoLostUpdate(t *testing.T, h Harness) {
	const (
		goroutines = 8
		perG       = 5
	)
	ctx := testCtx(t)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 3)
	_, err := hs[0].Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
		workspace.NewArtifact{Name: "counter", Content: []byte("0")})
	require.NoError(t, err)
	head0, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)

	errs := make([]error, goroutines)
	conflicts := make([]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := hs[g%len(hs)]
			actor := fmt.Sprintf("incr-%d", g)
			for range perG {
				n, err := incrementOnce(ctx, ws, actor, "counter")
				conflicts[g] += n
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "goroutine %d", g)
	}

	got, err := hs[2].Artifacts().Get(ctx, workspace.ByName("counter"))
	require.NoError(t, err)
	assert.Equal(t, int64(1+goroutines*perG), got.Version, "every increment is one version")
	assert.Equal(t, strconv.Itoa(goroutines*perG), string(got.Content), "no increment was lost")

	total := 0
	for _, n := range conflicts {
		total += n
	}
	evs := readAll(t, hs[1], workspace.EventQuery{AfterSeq: head0})
	var updates, conflictEvents int
	for _, ev := range evs {
		switch ev.Type {
		case workspace.EventArtifactUpdated:
			updates++
			assert.Equal(t, int64(1+updates), ev.Version, "updates appear in version order")
		case workspace.EventConflict:
			conflictEvents++
		}
	}
	assert.Equal(t, goroutines*perG, updates)
	assert.Equal(t, total, conflictEvents, "one conflict event per rejected write")
}

// incrementOnce adds 1 to the decimal counter in artifact name with
// read-modify-write under IfVersion, retrying on conflict until ctx ends.
// It returns the number of conflicts it met.
func incrementOnce(ctx context.Context, ws *workspace.Workspace, actor, name string) (int, error) {
	conflicts := 0
	for {
		cur, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
		if err != nil {
			return conflicts, fmt.Errorf("get: %w", err)
		}
		n, err := strconv.Atoi(string(cur.Content))
		if err != nil {
			return conflicts, fmt.Errorf("counter content %q: %w", cur.Content, err)
		}
		w := workspace.Write{Actor: actor, IfVersion: cur.Version}
		_, err = ws.Artifacts().Update(ctx, w, workspace.ByName(name),
			workspace.ArtifactChange{Content: []byte(strconv.Itoa(n + 1))})
		if err == nil {
			return conflicts, nil
		}
		ce, ok := asConflict(err)
		if !ok {
			return conflicts, fmt.Errorf("update from version %d: %w", cur.Version, err)
		}
		if ce.Current <= cur.Version {
			return conflicts, fmt.Errorf("conflict reports current version %d, not newer than the %d read", ce.Current, cur.Version)
		}
		conflicts++
		if ctx.Err() != nil {
			return conflicts, ctx.Err()
		}
	}
}

// caseCtx bounds one case's waits: a hung wait fails the case, not the run.
func caseCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), d)
	t.Cleanup(cancel)
	return ctx
}
