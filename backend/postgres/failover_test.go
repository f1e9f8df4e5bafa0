package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// The failover test's child processes: the test binary run again with
// failoverChildEnv set to "writer N" or "follower N" and the DSN in
// failoverDSNEnv (see TestMain).
const (
	failoverChildEnv = "AGENTSPACE_PGTEST_FAILOVER_CHILD"
	failoverDSNEnv   = "AGENTSPACE_PGTEST_FAILOVER_DSN"
)

// ack is one line a failover participant prints: an acknowledged write,
// an error it met, an event it was delivered, or the rewind that ended
// its subscription.
type ack struct {
	Kind  string    `json:"k"` // note, claim, lock, err, event, rewound
	Key   string    `json:"key,omitempty"`
	Token int64     `json:"token,omitempty"`
	Err   string    `json:"err,omitempty"`
	Unav  bool      `json:"unavailable,omitempty"`
	Rew   bool      `json:"rewound,omitempty"`
	Lost  bool      `json:"lost,omitempty"` // workspace.ErrLockLost
	At    time.Time `json:"at"`
	Event *workspace.Event
}

// failoverChild plays a writer or a follower until its stdin closes (a
// follower: until it was delivered the seq its stdin names).
func failoverChild(role, dsn string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer ws.Close()
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	emit := func(a ack) {
		a.At = time.Now()
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(a)
	}
	var kind string
	var n int
	if _, err := fmt.Sscanf(role, "%s %d", &kind, &n); err != nil {
		fmt.Fprintln(os.Stderr, "role:", err)
		return 1
	}
	if kind == "follower" {
		until := make(chan int64, 1)
		go func() {
			var h int64
			if _, err := fmt.Fscan(os.Stdin, &h); err == nil {
				until <- h
			}
		}()
		if err := followLog(ctx, ws, emit, until); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	write(ctx, ws, n, emit)
	return 0
}

// write is a failover writer's loop, until ctx ends: a keyed note
// (retried until acknowledged: once), a claim, a lease taken and released.
func write(ctx context.Context, ws *workspace.Workspace, n int, emit func(ack)) {
	actor := fmt.Sprintf("writer-%d", n)
	fail := func(op string, err error) {
		if ctx.Err() != nil {
			return // stopped, not failed
		}
		emit(ack{Kind: "err", Key: op, Err: err.Error(), Unav: errors.Is(err, workspace.ErrUnavailable), Rew: errors.Is(err, workspace.ErrRewound),
			Lost: errors.Is(err, workspace.ErrLockLost)})
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s-%d", actor, i)
		for ctx.Err() == nil {
			_, err := ws.Notes().Put(ctx, workspace.Write{Actor: actor, IdempotencyKey: key}, workspace.NotePut{Kind: "decision", Key: key, Body: "b"})
			if err == nil {
				emit(ack{Kind: "note", Key: key})
				break
			}
			fail("notes.put", err)
		}
		// A message that needs an ack, and its ack, each retried until
		// acknowledged under an idempotency key: once.
		var sent *workspace.Msg
		for ctx.Err() == nil && sent == nil {
			r, err := ws.Commit(ctx, workspace.Batch{Actor: actor, IdempotencyKey: "send-" + key, Ops: []workspace.Op{
				workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{actor}, Subject: key, Body: "b", RequiresAck: true}}}})
			if err == nil {
				sent = r.Results[0].Msg
				emit(ack{Kind: "message", Key: sent.ID})
				break
			}
			fail("messages.send", err)
		}
		for ctx.Err() == nil && sent != nil {
			_, err := ws.Commit(ctx, workspace.Batch{Actor: actor, IdempotencyKey: "ack-" + key, Ops: []workspace.Op{
				workspace.AckMessageOp{ID: sent.ID, Reply: key}}})
			if err == nil {
				emit(ack{Kind: "msgack", Key: sent.ID})
				break
			}
			if errors.Is(err, workspace.ErrNotFound) {
				// Asynchronous: the message was lost in the failover.
				emit(ack{Kind: "lostmsg", Key: sent.ID})
				break
			}
			fail("messages.ack", err)
		}
		if task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Lease: time.Hour}); err == nil {
			emit(ack{Kind: "claim", Key: task.ID})
		} else if !errors.Is(err, workspace.ErrNoTask) {
			fail("tasks.claim", err)
		}
		res := fmt.Sprintf("r%d", n%2)
		l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: actor, TTL: 2 * time.Second})
		switch {
		case err == nil:
			emit(ack{Kind: "lock", Key: res, Token: l.Token})
			if err := ws.Locks().Release(ctx, l); err != nil {
				fail("locks.release", err)
			}
		case !errors.Is(err, workspace.ErrLocked):
			fail("locks.acquire", err)
		}
	}
}

// followLog prints every event from the start until it has printed the seq
// until gives, or its subscription ends with ErrRewound (printed too).
func followLog(ctx context.Context, ws *workspace.Workspace, emit func(ack), until <-chan int64) error {
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Close()
	var last, end int64 = 0, -1
	for end < 0 || last < end {
		select {
		case end = <-until:
			continue
		default:
		}
		nctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		m, err := sub.Next(nctx)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			continue
		case errors.Is(err, workspace.ErrRewound):
			emit(ack{Kind: "rewound", Err: err.Error()})
			return nil
		case err != nil:
			return fmt.Errorf("next: %w", err)
		case m.Progress:
			continue
		}
		e := m.Event
		emit(ack{Kind: "event", Event: &e})
		last = e.Seq
	}
	return nil
}

// child is a failover participant, a process or a goroutine, and what
// it printed.
type child struct {
	cmd   *exec.Cmd // nil: a goroutine
	stdin io.WriteCloser
	// A goroutine's: cancel stops a writer, until tells a follower where
	// to stop, err is why it failed.
	cancel context.CancelFunc
	until  chan int64
	err    error
	mu     sync.Mutex
	acks   []ack
	done   chan struct{}
	errb   strings.Builder
}

func startChild(t *testing.T, role, dsn string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$") // #nosec G204 -- this test binary, as a child
	cmd.Env = append(os.Environ(), failoverChildEnv+"="+role, failoverDSNEnv+"="+dsn, "GORACE=atexit_sleep_ms=0")
	c := &child{cmd: cmd, done: make(chan struct{})}
	var err error
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &lockedBuilder{c: c}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var a ack
			if json.Unmarshal(sc.Bytes(), &a) == nil {
				c.mu.Lock()
				c.acks = append(c.acks, a)
				c.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	return c
}

// startLocal runs a writer (n >= 0) or a follower (n < 0) on ws in a
// goroutine of this process.
func startLocal(t *testing.T, ws *workspace.Workspace, n int) *child {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &child{cancel: cancel, until: make(chan int64, 1), done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-c.done })
	emit := func(a ack) {
		a.At = time.Now()
		c.mu.Lock()
		c.acks = append(c.acks, a)
		c.mu.Unlock()
	}
	go func() {
		defer close(c.done)
		if n < 0 {
			c.err = followLog(ctx, ws, emit, c.until)
			return
		}
		write(ctx, ws, n, emit)
	}()
	return c
}

// stop stops a writer and waits for it.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if c.cmd == nil {
		c.cancel()
		<-c.done
		return
	}
	require.NoError(t, c.stdin.Close())
	<-c.done
	require.NotNil(t, c.cmd.ProcessState)
	require.True(t, c.cmd.ProcessState.Success(), c.errb.String())
}

// followTo tells a follower to stop at seq head and waits for it.
func (c *child) followTo(ctx context.Context, t *testing.T, head int64) {
	t.Helper()
	if c.cmd == nil {
		c.until <- head
	} else {
		_, err := fmt.Fprintln(c.stdin, head)
		require.NoError(t, err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		t.Fatalf("a follower never reached seq %d: %s", head, c.errb.String())
	}
	if c.cmd == nil {
		require.NoError(t, c.err)
	} else {
		require.True(t, c.cmd.ProcessState.Success(), c.errb.String())
	}
}

type lockedBuilder struct{ c *child }

func (w *lockedBuilder) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.errb.Len() < 1<<16 {
		w.c.errb.Write(b)
	}
	return len(b), nil
}

// count is how many acks of kind it printed at or after since.
func (c *child) count(kind string, since time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.acks {
		if a.Kind == kind && !a.At.Before(since) {
			n++
		}
	}
	return n
}

func (c *child) all() []ack {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ack(nil), c.acks...)
}

// waitFor waits until cond holds, or fails t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pair is a primary and its streaming standby, each a cluster of the
// test's own. After a failover the promoted standby is the next pair's
// primary, with a new standby made from it (next): one test fails over
// several times at the cost of a pg_basebackup each, not an initdb.
type pair struct{ primary, standby *pgtest.Cluster }

func newPair(t *testing.T, sync bool) *pair {
	p := &pair{primary: pgtest.NewPrimary(t)}
	p.standby = p.primary.NewStandby(t)
	p.replicate(t, sync)
	return p
}

func (p *pair) replicate(t *testing.T, sync bool) {
	if sync {
		p.primary.SyncStandby(t)
	} else {
		p.primary.WaitStreaming(t, false)
	}
}

// next is the pair after p failed over: its promoted standby, and a new
// standby of that.
func (p *pair) next(t *testing.T, sync bool) *pair {
	n := &pair{primary: p.standby}
	n.standby = n.primary.NewStandby(t)
	n.replicate(t, sync)
	return n
}

// dsn is the clients' DSN of schema on p: both hosts, the read-write one wanted.
func (p *pair) dsn(schema string) string {
	return fmt.Sprintf("postgres://postgres@%s,%s/test?sslmode=disable&target_session_attrs=read-write&connect_timeout=2&ws_schema=%s",
		p.primary.Addr(), p.standby.Addr(), schema)
}

// The moments a failover test crashes the primary at (see crashAt).
const (
	atRandom      = "random"                    // whenever every writer has written a few notes
	atGroupCommit = "mid group commit"          // a transaction of two writers' writes, before its COMMIT
	atClaim       = "mid claim"                 // a transaction that claims a task, before its COMMIT
	atNotify      = "between commit and notify" // a note's commit acknowledged, its NOTIFY never sent
	atMigration   = "mid migration step"        // a schema migration's step, its SQL and version written, before its COMMIT
)

// TestFailoverToASynchronousStandbyLosesNothingAcknowledged runs 8
// writers (keyed notes, claims, leases) and 2 followers on a multi-host
// DSN (primary, standby; target_session_attrs=read-write) against a
// primary with a synchronous standby; crashes the primary mid-load and
// promotes the standby. Afterwards every acknowledged write is there
// once, no task was claimed twice, no fencing token was issued to two
// owners or went backwards, every writer wrote again on its own, and each
// follower was delivered exactly the log.
//
// It fails over four times in a row, at four moments: at a random one,
// with the writers and followers separate processes and the postmaster
// killed (kill -9); and, with them goroutines of this process (4 writers
// sharing a handle, so that their writes commit in groups), at a
// transaction carrying two writers' writes (a group commit) before its
// COMMIT, at a claim's before its COMMIT, and just after a note's COMMIT
// was acknowledged whose
// NOTIFY was never sent (the store's write hook holds the transaction
// while the primary crashes: postmaster and every backend killed).
func TestFailoverToASynchronousStandbyLosesNothingAcknowledged(t *testing.T) {
	// The failover tests run beside each other (they wait, mostly, on
	// clusters and on clients reconnecting), after the package's others.
	t.Parallel()
	p := newPair(t, true)
	for i, moment := range []string{atRandom, atGroupCommit, atClaim, atNotify, atMigration} {
		if i > 0 {
			p = p.next(t, true)
		}
		run := func(t *testing.T) { runFailover(t, p, true, moment) }
		if moment == atMigration {
			run = func(t *testing.T) { migrationFailover(t, p) }
		}
		if !t.Run(moment, run) {
			return
		}
	}
}

// migrationFailover writes a workspace at the latest schema, takes it two
// steps down, and opens it with ws_automigrate=true: the primary crashes
// inside the first step up, once its SQL and its version are written and
// before its COMMIT, and the standby is promoted. The new primary's schema
// is at the version before that step, not dirty; it opens, migrating the
// rest, with every acknowledged write there once, each task claimed once by
// its claimant, the lease's token kept, the log gap-free and verifying.
func migrationFailover(t *testing.T, p *pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	schema := pgtest.RandomName("failover_")
	dsn := p.dsn(schema)

	ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	const notes, tasks = 30, 6
	for i := range notes {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "x"})
		require.NoError(t, err)
	}
	for i := range tasks {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: strconv.Itoa(i)})
		require.NoError(t, err)
	}
	claimed := map[string]string{}
	for i := range tasks / 2 {
		actor := fmt.Sprint("agent-", i)
		task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor})
		require.NoError(t, err)
		claimed[task.ID] = actor
	}
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "deploy", Owner: "agent-0", TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	latest := m.Latest()
	require.NoError(t, m.Down(ctx, 2))
	require.NoError(t, m.Close())
	from := latest - 2

	crashed := make(chan struct{})
	var once sync.Once
	clear := postgres.SetMigrateHook(schema, func(_ context.Context, v uint, up bool) error {
		if up && v == from+1 {
			once.Do(func() {
				p.primary.Crash(t)
				close(crashed)
			})
		}
		return nil
	})
	t.Cleanup(clear)
	_, err = workspace.Open(ctx, dsn+"&ws_automigrate=true", workspace.Options{Private: true})
	require.Error(t, err, "the migrating open lost its primary")
	select {
	case <-crashed:
	default:
		t.Fatalf("the open failed before the step: %v", err)
	}
	clear()
	p.standby.Promote(t)

	m, err = workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	v, dirty, err := m.Version(ctx)
	require.NoError(t, m.Close())
	require.NoError(t, err)
	assert.Equal(t, from, v, "the crashed step left nothing, its version included")
	assert.False(t, dirty, "no migrate force is needed")

	ws, err = workspace.Open(ctx, dsn+"&ws_automigrate=true", workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	for i := range notes {
		n, err := ws.Notes().Get(ctx, "decision", fmt.Sprint("k", i))
		require.NoError(t, err, "acknowledged note k%d is there", i)
		assert.Equal(t, int64(1), n.Version)
	}
	for id, actor := range claimed {
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, actor, task.Assignee)
		assert.Equal(t, 1, task.Attempts)
	}
	held, err := ws.Locks().Get(ctx, "deploy")
	require.NoError(t, err)
	assert.Equal(t, lease.Token, held.Token, "the lease kept its token")
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 1000})
	require.NoError(t, err)
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Seq, "the log is gap-free")
	}
	rep, err := ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "y"})
	require.NoError(t, err, "the migrated workspace takes writes")
}

// TestFailoverToAnAsynchronousStandbyLosesOnlyTheLastAcknowledged runs
// the same with asynchronous replication, and states what it lost: only
// each writer's last notes acknowledged before the kill (those after the
// standby's last replayed WAL), never one acknowledged before a note that
// survived; the new primary's log is gap-free and consistent in itself,
// and a follower was delivered a prefix of it, or saw its subscription
// end with ErrRewound. Then, on the next pair, it loses a tail for sure
// (see rewound).
func TestFailoverToAnAsynchronousStandbyLosesOnlyTheLastAcknowledged(t *testing.T) {
	t.Parallel()
	p := newPair(t, false)
	if !t.Run(atRandom, func(t *testing.T) { runFailover(t, p, false, atRandom) }) {
		return
	}
	p = p.next(t, false)
	t.Run("rewound", func(t *testing.T) { rewound(t, p) })
}

// crashAt arms the write hook of schema's stores to crash p's primary
// at moment, once armed is set; crashed is closed when it has.
func crashAt(t *testing.T, p *pair, schema, moment string, armed *atomic.Bool) (crashed chan struct{}) {
	crashed = make(chan struct{})
	var (
		once   sync.Once
		target atomic.Value
	)
	crash := func() bool {
		once.Do(func() {
			p.primary.Crash(t)
			close(crashed)
		})
		return true
	}
	clear := postgres.SetWriteHook(schema, func(point string, tx any, types, actors []string) bool {
		if !armed.Load() {
			return false
		}
		select {
		case <-crashed:
			return false
		default:
		}
		switch {
		case moment == atGroupCommit && point == "commit" && len(slices.Compact(slices.Sorted(slices.Values(actors)))) >= 2:
			// Two writers' writes in one transaction: a group commit.
			return crash()
		case moment == atClaim && point == "commit" && slices.Contains(types, workspace.EventTaskClaimed):
			return crash()
		case moment == atNotify && point == "append" && slices.Equal(types, []string{workspace.EventNotePut}):
			// This note commits without a NOTIFY; then the primary crashes.
			return target.CompareAndSwap(nil, tx)
		case moment == atNotify && point == "committed" && target.Load() == tx:
			return crash()
		}
		return false
	})
	t.Cleanup(clear)
	return crashed
}

func runFailover(t *testing.T, p *pair, sync bool, moment string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	schema := pgtest.RandomName("failover_")
	dsn := p.dsn(schema)
	open := func() *workspace.Workspace {
		ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return ws
	}
	setup := open()
	const tasks = 400
	for i := range tasks {
		_, err := setup.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: strconv.Itoa(i)})
		require.NoError(t, err)
	}

	var armed atomic.Bool
	var crashed chan struct{}
	var followers, writers []*child
	if moment == atRandom {
		for i := range 2 {
			followers = append(followers, startChild(t, fmt.Sprintf("follower %d", i), dsn))
		}
		for i := range 8 {
			writers = append(writers, startChild(t, fmt.Sprintf("writer %d", i), dsn))
		}
	} else {
		crashed = crashAt(t, p, schema, moment, &armed)
		for range 2 {
			followers = append(followers, startLocal(t, open(), -1))
		}
		// Writers 0-3 share a handle: their writes commit in groups.
		shared := open()
		for i := range 8 {
			ws := shared
			if i >= 4 {
				ws = open()
			}
			writers = append(writers, startLocal(t, ws, i))
		}
	}
	start := time.Now()
	waitFor(t, time.Minute, "every writer acknowledged 3 notes", func() bool {
		for _, w := range writers {
			if w.count("note", start) < 3 {
				return false
			}
		}
		return true
	})

	if moment == atRandom {
		p.primary.KillPostmaster(t)
	} else {
		armed.Store(true)
		select {
		case <-crashed:
		case <-time.After(time.Minute):
			t.Fatalf("no transaction reached the moment %q", moment)
		}
	}
	killed := time.Now()
	// Clients see the outage for a while before the standby takes over.
	time.Sleep(time.Second)
	p.standby.Promote(t)
	promoted := time.Now()
	waitFor(t, time.Minute, "every writer acknowledged a note after the promote", func() bool {
		for _, w := range writers {
			if w.count("note", promoted) < 2 {
				return false
			}
		}
		return true
	})
	var slowest time.Duration
	for _, w := range writers {
		for _, a := range w.all() {
			if a.Kind == "note" && a.At.After(promoted) {
				slowest = max(slowest, a.At.Sub(promoted))
				break
			}
		}
	}
	for _, w := range writers {
		w.stop(t)
	}

	// The log, from the new primary.
	ws, err := workspace.Open(ctx, pgtest.WithParams(t, p.standby.DSN("test"), "ws_schema", schema), workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	var log []workspace.Event
	for after := int64(0); ; {
		page, err := ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: after, Limit: 10000})
		require.NoError(t, err)
		log = append(log, page.Events...)
		if page.Next >= page.Head {
			break
		}
		after = page.Next
	}
	head := log[len(log)-1].Seq
	for i, e := range log {
		require.Equal(t, int64(i+1), e.Seq, "the log is gap-free")
	}
	var notes, messages, claims, unavailable, rewoundWrites, lostLeases, other int
	var lostAt []time.Time                  // when the notes lost were acknowledged
	lostBy := map[string]int{}              // writer -> notes of its lost so far
	claimed := map[string]string{}          // task id -> the writer whose claim was acknowledged
	tokens := map[string]map[int64]string{} // resource -> token -> the writer it was acknowledged to
	for wi, w := range writers {
		actor := fmt.Sprintf("writer-%d", wi)
		var lastToken = map[string]int64{}
		for _, a := range w.all() {
			switch a.Kind {
			case "note":
				notes++
				n, err := ws.Notes().Get(ctx, "decision", a.Key)
				// Asynchronous: lost, if acknowledged before the promote (the
				// dead primary's backends go on acknowledging until they
				// notice their postmaster is gone).
				if !sync && errors.Is(err, workspace.ErrNotFound) && a.At.Before(promoted) {
					lostAt = append(lostAt, a.At)
					lostBy[actor]++
					continue
				}
				require.NoError(t, err, "acknowledged note %s is there", a.Key)
				assert.Equal(t, int64(1), n.Version, "note %s was written once", a.Key)
				if a.At.Before(promoted) {
					assert.Zero(t, lostBy[actor], "%s's note %s survived, but one it was acknowledged before it was lost", actor, a.Key)
				}
			case "message", "msgack":
				m, err := ws.Messages().Get(ctx, a.Key)
				if !sync && errors.Is(err, workspace.ErrNotFound) && a.At.Before(promoted) {
					continue // asynchronous: lost with the notes around it
				}
				require.NoError(t, err, "acknowledged message %s is there", a.Key)
				messages++
				if a.Kind == "msgack" && (sync || !a.At.Before(promoted)) {
					assert.Len(t, m.Acks, 1, "message %s's acknowledged ack is there, once", a.Key)
					assert.Empty(t, m.Pending)
				}
			case "lostmsg":
				assert.False(t, sync, "message %s, acknowledged, was lost with synchronous replication", a.Key)
			case "claim":
				claims++
				if !sync {
					continue // an acknowledged claim may be lost, and the task claimed again
				}
				prev, dup := claimed[a.Key]
				assert.False(t, dup, "task %s claimed by %s and %s", a.Key, prev, actor)
				claimed[a.Key] = actor
				task, err := ws.Tasks().Get(ctx, a.Key)
				require.NoError(t, err)
				assert.Equal(t, actor, task.Assignee, "task %s is %s's", a.Key, actor)
				assert.Equal(t, 1, task.Attempts, "task %s was claimed once", a.Key)
			case "lock":
				if !sync {
					continue // an acknowledged token may be lost, and issued again
				}
				// Leases are re-entrant by owner: a writer whose release
				// failed in the outage takes its own lease again, with its
				// token. Another writer never gets that token.
				if tokens[a.Key] == nil {
					tokens[a.Key] = map[int64]string{}
				}
				if prev, ok := tokens[a.Key][a.Token]; ok {
					assert.Equal(t, prev, actor, "token %d of %s acknowledged to two writers", a.Token, a.Key)
				}
				tokens[a.Key][a.Token] = actor
				assert.GreaterOrEqual(t, a.Token, lastToken[a.Key], "%s's tokens of %s never go back", actor, a.Key)
				lastToken[a.Key] = a.Token
			case "err":
				switch {
				case a.Unav:
					unavailable++
				case a.Rew && !sync:
					rewoundWrites++
				case a.Lost && a.Key == "locks.release":
					// A lease (2 s) acquired just before the crash can
					// run out while its release waits for the new
					// primary, and be taken by another writer: the
					// release then says the lease was lost, as it must.
					lostLeases++
					t.Logf("%s: %s: %s", actor, a.Key, a.Err)
				default:
					other++
					t.Logf("%s: %s: %s", actor, a.Key, a.Err)
				}
			}
		}
	}
	// The log's own view: each task claimed at most once, each lease's
	// tokens strictly increasing in commit order.
	claimEvents := map[string]int{}
	logTokens, logOwner := map[string]int64{}, map[string]string{}
	for _, e := range log {
		switch e.Type {
		case workspace.EventTaskClaimed:
			claimEvents[e.Subject.ID]++
			assert.Equal(t, 1, claimEvents[e.Subject.ID], "task %s claimed twice in the log", e.Subject.ID)
		case workspace.EventLockAcquired:
			if e.Actor == logOwner[e.Subject.ID] {
				assert.GreaterOrEqual(t, e.Version, logTokens[e.Subject.ID], "token of %s went backwards at seq %d", e.Subject.ID, e.Seq)
			} else {
				assert.Greater(t, e.Version, logTokens[e.Subject.ID], "token of %s not new for a new owner at seq %d", e.Subject.ID, e.Seq)
			}
			logTokens[e.Subject.ID], logOwner[e.Subject.ID] = e.Version, e.Actor
		}
	}
	for res, ts := range tokens {
		for tok := range ts {
			assert.LessOrEqual(t, tok, logTokens[res], "acknowledged token %d of %s is in the log", tok, res)
		}
	}

	// The followers were delivered exactly the log; with asynchronous
	// replication, a prefix of it, or what they were delivered ended in
	// ErrRewound.
	rewinds := 0
	for i, f := range followers {
		f.followTo(ctx, t, head)
		var got []workspace.Event
		rewound := false
		for _, a := range f.all() {
			switch a.Kind {
			case "event":
				require.False(t, rewound, "follower %d was delivered an event after its subscription ended", i)
				got = append(got, *a.Event)
			case "rewound":
				rewound = true
				t.Logf("follower %d: %s", i, a.Err)
			}
		}
		for j := range got {
			require.Equal(t, int64(j+1), got[j].Seq, "follower %d was delivered each seq once, in order", i)
		}
		if rewound {
			require.False(t, sync, "follower %d saw a rewind of a synchronous standby's log", i)
			rewinds++
			differ := 0
			for j := range min(len(got), len(log)) {
				if got[j].Time != log[j].Time || got[j].Type != log[j].Type || got[j].Subject != log[j].Subject || got[j].Version != log[j].Version {
					differ++
				}
			}
			t.Logf("follower %d was delivered %d events before ErrRewound: %d differ from the new primary's at their seq, %d are beyond the head it had when the follower read it",
				i, len(got), differ, max(0, len(got)-len(log)))
			continue
		}
		require.Len(t, got, len(log), "follower %d", i)
		for j := range log {
			assert.Equal(t, log[j].Seq, got[j].Seq, "follower %d", i)
			assert.Equal(t, log[j].Time, got[j].Time, "follower %d at seq %d", i, log[j].Seq)
			assert.Equal(t, log[j].Type, got[j].Type, "follower %d at seq %d", i, log[j].Seq)
			assert.Equal(t, log[j].Subject, got[j].Subject, "follower %d at seq %d", i, log[j].Seq)
			assert.Equal(t, log[j].Version, got[j].Version, "follower %d at seq %d", i, log[j].Seq)
		}
	}
	if len(lostAt) > 0 {
		first, last := lostAt[0], lostAt[0]
		for _, at := range lostAt {
			if at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		t.Logf("asynchronous replication lost %d acknowledged notes, acknowledged from %v to %v after the kill (negative: before it)",
			len(lostAt), first.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond))
	} else if !sync {
		t.Logf("asynchronous replication lost no acknowledged note this time")
	}
	assert.Zero(t, other, "every error the writers met was ErrUnavailable (or, asynchronous, ErrRewound; or a release's ErrLockLost)")
	t.Logf("%s: acknowledged %d notes, %d messages and acks, %d claims, %d leases; %d ErrUnavailable, %d ErrRewound met by writers, %d releases found their lease lost, %d followers ended by ErrRewound; log head %d; promote %v after the crash; every writer wrote again within %v of the promote",
		moment, notes, messages, claims, len(tokens["r0"])+len(tokens["r1"]), unavailable, rewoundWrites, lostLeases, rewinds, head, promoted.Sub(killed).Round(time.Millisecond), slowest.Round(time.Millisecond))
}

// rewound makes asynchronous replication lose a tail for sure: the
// standby's WAL receiver is stopped (primary_conninfo emptied), so what
// the primary acknowledges next never reaches it; a follower is delivered
// those events; the primary crashes and the standby is promoted. Then the
// writer's handle refuses its next write with ErrRewound (its seqs would
// go to other events), writing nothing; another handle writes past the
// lost head; and the follower's subscription ends with ErrRewound,
// delivering no event of the new history for a seq it was delivered.
// So does that of a second follower that reaches the database through a
// proxy, cut before the crash and sent to the new primary only once the
// new history is past the lost seqs: it never sees the head go back,
// only another event at the seq it was delivered last.
func rewound(t *testing.T, p *pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	schema := pgtest.RandomName("rewound_")
	open := func() *workspace.Workspace {
		ws, err := workspace.Open(ctx, p.dsn(schema), workspace.Options{Private: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return ws
	}
	put := func(ws *workspace.Workspace, key string) error {
		for {
			_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "w", IdempotencyKey: key}, workspace.NotePut{Kind: "decision", Key: key, Body: "b"})
			if !errors.Is(err, workspace.ErrUnavailable) {
				return err
			}
			require.NoError(t, ctx.Err(), "the store never came back")
			time.Sleep(50 * time.Millisecond)
		}
	}
	writer, follower := open(), open()
	proxy := pgtest.NewProxy(t, p.primary.Addr())
	late, err := workspace.Open(ctx, pgtest.WithHost(t, p.primary.DSN("test"), proxy.Addr())+"&ws_schema="+schema, workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = late.Close() })
	for i := range 5 {
		require.NoError(t, put(writer, fmt.Sprintf("kept-%d", i)))
	}
	primary, standby := p.primary.Connect(t, "postgres"), p.standby.Connect(t, "postgres")
	var lsn string
	require.NoError(t, primary.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn))
	waitFor(t, time.Minute, "the standby replayed the kept notes", func() bool {
		var ok bool
		require.NoError(t, standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&ok))
		return ok
	})
	_, err = standby.Exec(ctx, `ALTER SYSTEM SET primary_conninfo = ''`)
	require.NoError(t, err)
	_, err = standby.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	waitFor(t, time.Minute, "the standby stopped receiving WAL", func() bool {
		var n int
		require.NoError(t, standby.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n))
		return n == 0
	})
	kept, err := writer.Events().Head(ctx)
	require.NoError(t, err)

	sub, err := follower.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	defer sub.Close()
	lateSub, err := late.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	defer lateSub.Close()
	for i := range 5 {
		require.NoError(t, put(writer, fmt.Sprintf("lost-%d", i)))
	}
	lost, err := writer.Events().Head(ctx)
	require.NoError(t, err)
	var delivered []workspace.Event
	for len(delivered) == 0 || delivered[len(delivered)-1].Seq < lost {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		delivered = append(delivered, m.Event)
	}
	for seq := int64(0); seq < lost; {
		m, err := lateSub.Next(ctx)
		require.NoError(t, err)
		seq = m.Event.Seq
	}

	proxy.Cut()
	p.primary.Crash(t)
	p.standby.Promote(t)
	// The standby has the kept notes, not the lost ones.
	head, err := open().Events().Head(ctx)
	require.NoError(t, err)
	require.Equal(t, kept, head, "the new primary's head is where replication stopped")

	err = put(writer, "after-rewind")
	require.ErrorIs(t, err, workspace.ErrRewound, "the writer's handle committed up to seq %d; the log now ends at %d", lost, kept)
	t.Logf("the writer's next write: %v", err)
	other := open()
	_, err = other.Notes().Get(ctx, "decision", "after-rewind")
	require.ErrorIs(t, err, workspace.ErrNotFound, "the refused write wrote nothing")
	for i := range int(lost-kept) + 3 {
		require.NoError(t, put(other, fmt.Sprintf("new-%d", i)))
	}
	newHead, err := other.Events().Head(ctx)
	require.NoError(t, err)
	require.Greater(t, newHead, lost, "the new history passed the seqs the follower was delivered")

	for {
		m, err := sub.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, workspace.ErrRewound)
			t.Logf("the follower, delivered seqs %d-%d (%d-%d lost), got: %v", delivered[0].Seq, lost, kept+1, lost, err)
			break
		}
		require.Greater(t, m.Event.Seq, lost, "a seq delivered again")
		t.Fatalf("the follower was delivered seq %d of the new history after seq %d of the lost one", m.Event.Seq, lost)
	}
	// The late follower, let through to the new primary now.
	proxy.Retarget(p.standby.Addr())
	proxy.Restore()
	for {
		m, err := lateSub.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, workspace.ErrRewound)
			t.Logf("the late follower got: %v", err)
			break
		}
		t.Fatalf("the late follower was delivered seq %d of the new history after seq %d of the lost one", m.Event.Seq, lost)
	}
	// The writer's handle writes again once the log is past its seqs: a
	// seq it had acknowledged is never handed out again.
	require.NoError(t, put(writer, "after-the-head-passed"))
}
