package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentspace/agentspace/workspace"
)

// The load test: 64 agents (7 goroutines on each of 8 handles, and 2 in each
// of 4 child processes) do mixed work on one store for a bounded time and a
// bounded number of operations each, while a subscriber per handle follows
// the log. Afterwards nothing acknowledged is missing: no lost increment,
// no task claimed twice, no note or batch lost, no event missed or seen
// twice; the lock hand-overs in the log are well formed; the heap stayed
// flat; and closing every handle leaves no goroutine behind.

// loadDurationEnv sets how long the load runs (a time.ParseDuration string).
// The default keeps CI short; the figures in the README come from 60s.
const loadDurationEnv = "AGENTSPACE_LOAD_DURATION"

const (
	roleLoadAgent      = "load-agent"
	loadHandles        = 8
	loadAgentsPerHndl  = 7
	loadProcesses      = 4
	loadAgentsPerProc  = 2
	loadCounters       = 16
	loadLocks          = 4
	loadInitialTasks   = 200
	loadMaxOpsPerAgent = 20000
	loadDefault        = 5 * time.Second
)

// loadTally is what one or more agents did and had acknowledged.
type loadTally struct {
	Ops        int
	Increments map[string]int    // counter -> acknowledged increments
	Claimed    map[string]string // task id -> claimer
	DoubleBy   []string          // claims of a task already claimed by this tally
	Notes      map[string]string // note key -> last acknowledged body
	Batches    []string          // artifact names of acknowledged batches
	Locks      int               // acknowledged lock hand-overs
	Created    int               // tasks created
	Errors     []string          // unexpected errors (the first few)
	ErrorCount int
	// MaxOp is the slowest single operation (an increment counts its retries).
	MaxOp      time.Duration
	MaxOpKind  string
	PeakRSSKiB int64 `json:",omitempty"`
}

func newLoadTally() *loadTally {
	return &loadTally{Increments: map[string]int{}, Claimed: map[string]string{}, Notes: map[string]string{}}
}

func (t *loadTally) merge(o *loadTally) {
	t.Ops += o.Ops
	for k, v := range o.Increments {
		t.Increments[k] += v
	}
	for id, by := range o.Claimed {
		if prev, ok := t.Claimed[id]; ok {
			t.DoubleBy = append(t.DoubleBy, fmt.Sprintf("task %s by %s and %s", id, prev, by))
		}
		t.Claimed[id] = by
	}
	t.DoubleBy = append(t.DoubleBy, o.DoubleBy...)
	for k, v := range o.Notes {
		t.Notes[k] = v
	}
	t.Batches = append(t.Batches, o.Batches...)
	t.Locks += o.Locks
	t.Created += o.Created
	t.ErrorCount += o.ErrorCount
	if o.MaxOp > t.MaxOp {
		t.MaxOp, t.MaxOpKind = o.MaxOp, o.MaxOpKind
	}
	for _, e := range o.Errors {
		if len(t.Errors) < 10 {
			t.Errors = append(t.Errors, e)
		}
	}
}

func (t *loadTally) fail(format string, args ...any) {
	t.ErrorCount++
	if len(t.Errors) < 10 {
		t.Errorf(format, args...)
	}
}

func (t *loadTally) Errorf(format string, args ...any) {
	t.Errors = append(t.Errors, fmt.Sprintf(format, args...))
}

// loadDuration reads loadDurationEnv, for tests only.
func loadDuration(t testing.TB) time.Duration {
	s := os.Getenv(loadDurationEnv)
	if s == "" {
		return loadDefault
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "%s=%q", loadDurationEnv, s)
	return d
}

func counterNameN(i int) string { return fmt.Sprintf("load/counter-%d", i) }

func testLoad(t *testing.T, h Harness) {
	dur := loadDuration(t)
	// Not under testCtx's two minutes: a long run's bound grows with it.
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	t.Cleanup(cancel)
	dsn := h.NewDSN(t)
	// Everything the load starts must be gone once its handles are closed.
	// Behind a Backing harness's handles is a store that lives as long as
	// dsn does (a server's): the file watch it begins when first waited on
	// (dirwatch) is the server's, ended at the harness's cleanup, not the
	// handles'; so are the PostgreSQL connections its pool opened under
	// the load and keeps, where pgx's background reader of one stays
	// blocked in a read after it was stopped until the connection next
	// receives. The handles of such a harness watch no file and hold no
	// database connection of their own.
	leaks := []goleak.Option{goleak.IgnoreCurrent()}
	if storeDSN(h, dsn) != dsn {
		leaks = append(leaks,
			goleak.IgnoreAnyFunction("github.com/agentspace/agentspace/internal/dirwatch.(*impl).run"),
			goleak.IgnoreAnyFunction("github.com/agentspace/agentspace/internal/dirwatch.(*impl).tick"),
			goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"))
	}

	hs := make([]*workspace.Workspace, loadHandles)
	for i := range hs {
		ws, err := workspace.Open(ctx, dsn)
		require.NoError(t, err)
		hs[i] = ws
	}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, ws := range hs {
			assert.NoError(t, ws.Close())
		}
	}
	defer closeAll()

	setup := workspace.Write{Actor: "setup"}
	for i := range loadCounters {
		_, err := hs[0].Artifacts().Create(ctx, setup, workspace.NewArtifact{Name: counterNameN(i), Content: []byte("0")})
		require.NoError(t, err)
	}
	ops := make([]workspace.Op, loadInitialTasks)
	for i := range ops {
		ops[i] = workspace.CreateTaskOp{Task: workspace.NewTask{Title: fmt.Sprintf("initial %d", i), Priority: i % 4}}
	}
	_, err := hs[0].Commit(ctx, workspace.Batch{Actor: "setup", Ops: ops})
	require.NoError(t, err)

	// One subscriber per handle follows the log from the start.
	subs := make([]*workspace.Subscription, loadHandles)
	seen := make([][]int64, loadHandles)
	var (
		subWG  sync.WaitGroup
		seenMu sync.Mutex
	)
	for i, ws := range hs {
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: 200 * time.Millisecond})
		require.NoError(t, err)
		subs[i] = sub
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for m := range sub.C() {
				if !m.Progress {
					seenMu.Lock()
					seen[i] = append(seen[i], m.Event.Seq)
					seenMu.Unlock()
				}
			}
		}()
	}

	// The heap, sampled while the load runs.
	var (
		samples  []uint64
		sampleMu sync.Mutex
	)
	stopSampling := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				sampleMu.Lock()
				samples = append(samples, ms.HeapInuse)
				sampleMu.Unlock()
			}
		}
	}()

	kids := make([]*relKid, loadProcesses)
	for i := range kids {
		kids[i] = startRelChild(t, ctx, subtestPattern(t), roleLoadAgent, fmt.Sprintf("load-%d", i), dsn,
			fmt.Sprintf("%s,%d", dur, i), dur+2*time.Minute)
	}
	for _, k := range kids {
		k.expect(t, ctx, "ready")
	}
	started := time.Now()
	stopAt := started.Add(dur)
	for _, k := range kids {
		k.send(t, "go")
	}

	total := newLoadTally()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range loadHandles * loadAgentsPerHndl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tally := runLoadAgent(ctx, hs[i%loadHandles], fmt.Sprintf("agent-h%d", i), uint64(i), stopAt) // #nosec G115 -- a small non-negative agent number
			mu.Lock()
			total.merge(tally)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var childRSS []int64
	for _, k := range kids {
		line := k.expect(t, ctx, "tally ")
		var tally loadTally
		require.NoError(t, json.Unmarshal([]byte(line), &tally), "child %s tally", k.name)
		childRSS = append(childRSS, tally.PeakRSSKiB)
		total.merge(&tally)
		k.wait(t, ctx)
	}
	elapsed := time.Since(started)
	close(stopSampling)
	<-samplerDone

	assert.Zero(t, total.ErrorCount, "unexpected errors, the first: %v", total.Errors)
	assert.Empty(t, total.DoubleBy, "double claims")
	checkLoadStore(t, ctx, hs[0], total)

	head, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)
	checkLogContiguous(t, ctx, hs[0], head)
	// Every subscriber reaches the head; then the streams are closed.
	for i, sub := range subs {
		waitSeen(t, ctx, &seenMu, seen, i, head)
		require.NoError(t, sub.Close())
	}
	subWG.Wait()
	for i := range subs {
		assertExactlyOnce(t, seen[i], head, fmt.Sprintf("subscriber %d", i))
	}

	sampleMu.Lock()
	heapFirst, heapSecond := halvesPeak(samples)
	sampleMu.Unlock()
	closeAll()
	goleak.VerifyNone(t, leaks...)

	t.Logf("load: %d agents for %s: %d operations (%.0f/s), %d increments, %d claims, %d tasks created, %d batches, %d lock hand-overs, %d events, slowest operation %s (%s); "+
		"heap in use peak %s (first half) / %s (second half); peak RSS %s (this process), children %v KiB",
		loadHandles*loadAgentsPerHndl+loadProcesses*loadAgentsPerProc, elapsed.Round(time.Millisecond), total.Ops,
		float64(total.Ops)/elapsed.Seconds(), sum(total.Increments), len(total.Claimed), total.Created, len(total.Batches),
		total.Locks, head, total.MaxOp.Round(time.Millisecond), total.MaxOpKind, mib(heapFirst), mib(heapSecond), kib(peakRSSKiB()), childRSS)
	// Flat: what the second half needed is no more than the first half's
	// peak plus slack; a leak per operation grows without bound instead.
	assert.LessOrEqual(t, heapSecond, 2*heapFirst+64<<20, "heap grew: samples %v", samples)
}

// runLoadAgent does mixed work as actor until stopAt or its op budget.
func runLoadAgent(ctx context.Context, ws *workspace.Workspace, actor string, seed uint64, stopAt time.Time) *loadTally {
	tally := newLoadTally()
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano()))) // #nosec G404 G115 -- test workload randomness; the conversion only mixes bits
	for n := 0; n < loadMaxOpsPerAgent && time.Now().Before(stopAt) && ctx.Err() == nil; n++ {
		tally.Ops++
		began := time.Now()
		kind := runLoadOp(ctx, ws, actor, n, rng, tally)
		if d := time.Since(began); d > tally.MaxOp {
			tally.MaxOp, tally.MaxOpKind = d, kind
		}
	}
	return tally
}

// runLoadOp does one operation of the mix and records its outcome.
func runLoadOp(ctx context.Context, ws *workspace.Workspace, actor string, n int, rng *rand.Rand, tally *loadTally) string {
	noteKey := actor
	var kind string
	switch r := rng.IntN(100); {
	case r < 25:
		kind = "increment"
		name := counterNameN(rng.IntN(loadCounters))
		if _, err := incrementOnce(ctx, ws, actor, name); err != nil {
			tally.fail("%s: increment %s: %v", actor, name, err)
			return kind
		}
		tally.Increments[name]++
	case r < 45:
		kind = "claim"
		task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor})
		if errors.Is(err, workspace.ErrNoTask) {
			return kind
		}
		if err != nil {
			tally.fail("%s: claim: %v", actor, err)
			return kind
		}
		if prev, ok := tally.Claimed[task.ID]; ok {
			tally.DoubleBy = append(tally.DoubleBy, fmt.Sprintf("task %s by %s and %s", task.ID, prev, actor))
		}
		tally.Claimed[task.ID] = actor
		if _, err := ws.Tasks().Complete(ctx, workspace.Write{Actor: actor}, task.ID, workspace.TaskResult{Summary: "done"}); err != nil {
			tally.fail("%s: complete %s: %v", actor, task.ID, err)
		}
	case r < 55:
		kind = "create task"
		if _, err := ws.Tasks().Create(ctx, workspace.Write{Actor: actor}, workspace.NewTask{Title: fmt.Sprintf("%s %d", actor, n), Priority: rng.IntN(4)}); err != nil {
			tally.fail("%s: create task: %v", actor, err)
			return kind
		}
		tally.Created++
	case r < 70:
		kind = "note"
		body := strconv.Itoa(n)
		if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: actor}, workspace.NotePut{Kind: "progress", Key: noteKey, Body: body}); err != nil {
			tally.fail("%s: note: %v", actor, err)
			return kind
		}
		tally.Notes[noteKey] = body
	case r < 80:
		kind = "lock"
		res := fmt.Sprintf("load:lock-%d", rng.IntN(loadLocks))
		lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: actor, TTL: time.Minute})
		if errors.Is(err, workspace.ErrLocked) {
			return kind
		}
		if err != nil {
			tally.fail("%s: acquire %s: %v", actor, res, err)
			return kind
		}
		_, err = ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "guarded", Key: res, Body: actor}, Cond: workspace.Cond{Fence: lease.Token}},
			workspace.ReleaseLockOp{Resource: res, Token: lease.Token},
		}})
		if err != nil {
			tally.fail("%s: fenced write and release %s: %v", actor, res, err)
			return kind
		}
		tally.Locks++
	case r < 90:
		kind = "batch"
		name := fmt.Sprintf("load/%s/%d", actor, n)
		_, err := ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Content: []byte(name)}},
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "batch", Key: name, Body: name}},
		}})
		if err != nil {
			tally.fail("%s: batch %s: %v", actor, name, err)
			return kind
		}
		tally.Batches = append(tally.Batches, name)
	default:
		kind = "list"
		if _, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: "load/counter-"}); err != nil {
			tally.fail("%s: list: %v", actor, err)
		}
	}
	return kind
}

// checkLoadStore checks the store against what was acknowledged.
func checkLoadStore(t *testing.T, ctx context.Context, ws *workspace.Workspace, total *loadTally) {
	t.Helper()
	for i := range loadCounters {
		name := counterNameN(i)
		a, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
		require.NoError(t, err)
		n := total.Increments[name]
		assert.Equal(t, strconv.Itoa(n), string(a.Content), "%s: lost increments", name)
		assert.Equal(t, int64(1+n), a.Version, "%s: one version per increment", name)
	}
	for id, by := range total.Claimed {
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status, "task %s", id)
		assert.Equal(t, by, task.Assignee, "task %s", id)
		assert.Equal(t, 1, task.Attempts, "task %s was claimed once", id)
	}
	for key, body := range total.Notes {
		n, err := ws.Notes().Get(ctx, "progress", key)
		require.NoError(t, err)
		assert.Equal(t, body, n.Body, "note %s keeps its last acknowledged body", key)
	}
	for _, name := range total.Batches {
		a, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
		if assert.NoError(t, err, "batch %s", name) {
			assert.Equal(t, name, string(a.Content))
		}
		_, err = ws.Notes().Get(ctx, "batch", name)
		assert.NoError(t, err, "batch %s: its note", name)
	}

	// The log agrees: one claim event per acknowledged claim, and each
	// lock's hand-overs alternate acquired(n), released(n), acquired(n+1).
	claims := 0
	lastTok := map[string]int64{}
	held := map[string]bool{}
	for ev := range readAllEvents(t, ctx, ws) {
		switch ev.Type {
		case workspace.EventTaskClaimed:
			claims++
		case workspace.EventLockAcquired:
			r := ev.Subject.ID
			assert.False(t, held[r], "seq %d: %s acquired while held", ev.Seq, r)
			assert.Equal(t, lastTok[r]+1, ev.Version, "seq %d: %s token", ev.Seq, r)
			held[r], lastTok[r] = true, ev.Version
		case workspace.EventLockReleased, workspace.EventLockExpired, workspace.EventLockForced:
			r := ev.Subject.ID
			assert.True(t, held[r], "seq %d: %s released while free", ev.Seq, r)
			assert.Equal(t, lastTok[r], ev.Version, "seq %d: %s token", ev.Seq, r)
			held[r] = false
		}
	}
	assert.Equal(t, len(total.Claimed), claims, "claim events")
	locks := 0
	for _, tok := range lastTok {
		locks += int(tok)
	}
	assert.Equal(t, total.Locks, locks, "lock hand-overs in the log")
}

// readAllEvents yields the whole log, page by page.
func readAllEvents(t *testing.T, ctx context.Context, ws *workspace.Workspace) func(func(workspace.Event) bool) {
	return func(yield func(workspace.Event) bool) {
		var after int64
		for {
			page, err := ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: after, Limit: 10000})
			require.NoError(t, err)
			for _, ev := range page.Events {
				if !yield(ev) {
					return
				}
			}
			if len(page.Events) == 0 || page.Next >= page.Head {
				return
			}
			after = page.Next
		}
	}
}

// checkLogContiguous checks that the log holds seqs 1..head, each once, in order.
func checkLogContiguous(t *testing.T, ctx context.Context, ws *workspace.Workspace, head int64) {
	t.Helper()
	var seqs []int64
	for ev := range readAllEvents(t, ctx, ws) {
		seqs = append(seqs, ev.Seq)
	}
	assertExactlyOnce(t, seqs, head, "the log")
}

// assertExactlyOnce checks that seqs is exactly 1..head.
func assertExactlyOnce(t *testing.T, seqs []int64, head int64, who string) {
	t.Helper()
	if !assert.Len(t, seqs, int(head), "%s: events seen", who) {
		return
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			assert.Fail(t, "events missed, repeated or out of order", "%s: position %d has seq %d", who, i, s)
			return
		}
	}
}

// waitSeen waits until subscriber i has seen head, bounded by ctx.
func waitSeen(t *testing.T, ctx context.Context, mu *sync.Mutex, seen [][]int64, i int, head int64) {
	t.Helper()
	for {
		mu.Lock()
		s := seen[i]
		n := len(s)
		last := int64(0)
		if n > 0 {
			last = s[n-1]
		}
		mu.Unlock()
		if last >= head {
			return
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "subscriber did not reach the head", "subscriber %d at seq %d of %d", i, last, head)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func halvesPeak(samples []uint64) (first, second uint64) {
	for i, s := range samples {
		if i < len(samples)/2 {
			first = max(first, s)
		} else {
			second = max(second, s)
		}
	}
	return first, second
}

// peakRSSKiB is this process's peak resident set (VmHWM), 0 where unknown.
func peakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func kib(k int64) string  { return fmt.Sprintf("%.1f MiB", float64(k)/1024) }

// loadAgentChild runs loadAgentsPerProc agents in this process once told
// "go", and prints their merged tally as one JSON line.
func loadAgentChild(t *testing.T, dsn, arg string, in *bufio.Scanner, say func(string, ...any)) {
	ds, idx, _ := strings.Cut(arg, ",")
	dur, err := time.ParseDuration(ds)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	ws := open(t, dsn)
	say("ready")
	cmd, err := readLine(in)
	require.NoError(t, err)
	require.Equal(t, "go", cmd)
	stopAt := time.Now().Add(dur)
	total := newLoadTally()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range loadAgentsPerProc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := strconv.Atoi(idx)
			tally := runLoadAgent(ctx, ws, fmt.Sprintf("agent-p%s-%d", idx, i), uint64(1000+10*n+i), stopAt) // #nosec G115 -- a small non-negative agent number
			mu.Lock()
			total.merge(tally)
			mu.Unlock()
		}()
	}
	wg.Wait()
	total.PeakRSSKiB = peakRSSKiB()
	b, err := json.Marshal(total)
	require.NoError(t, err)
	say("tally %s", b)
}
