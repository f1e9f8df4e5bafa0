package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testPolicy is the policy the policy cases apply: one role per rule kind.
const testPolicy = `
[roles.planner]
artifacts_read  = ["**"]
artifacts_write = ["plans/**"]
notes_read  = ["*"]
notes_write = ["decision"]
tasks = ["add"]

[roles.implementer]
artifacts_read  = ["src/**", "plans/**"]
artifacts_write = ["src/**"]
artifacts_delete = []
notes_read = ["decision"]
tasks = ["claim", "finish"]
locks = ["file:src/**"]

[roles.lead]
tasks = ["others"]
admin = ["compact"]

[actors]
root  = ["admin"]
alice = ["planner"]
bob   = ["implementer"]
lena  = ["lead"]
`

// policyCases are the cases of the policy's enforcement, one per rule kind.
var policyCases = []coreCase{
	{"PolicyArtifactRulesReadWriteDelete", testPolicyArtifacts},
	{"PolicyNoteRulesByKind", testPolicyNotes},
	{"PolicyTaskRules", testPolicyTasks},
	{"PolicyLockRulesByResource", testPolicyLocks},
	{"PolicyAdminRules", testPolicyAdmin},
	{"PolicyBatchWithOneForbiddenOpIsRefusedWhole", testPolicyBatch},
	{"PolicyChangeIsSeenByEveryHandle", testPolicyChangeSeen},
	{"PolicyChangeBindsConcurrentWritersWithinTheRecheck", testPolicyChangeUnderWriters},
	{"PolicyEventReadsLeaveOutWhatTheActorMayNotRead", testPolicyEventReads},
	{"PolicySubscriptionLeavesOutWhatTheActorMayNotRead", testPolicySubscription},
	{"PolicyStatusLeavesOutWhatTheActorMayNotRead", testPolicyStatus},
	{"PolicyExportNeedsTheAdminRight", testPolicyExport},
	{"PolicyGCAndVerifyNeedTheAdminRights", testPolicyGCAndVerify},
	{"PolicyIdempotentReplayIsCheckedAgain", testPolicyReplay},
	{"PolicyBatchPinNeedsThePinRight", testPolicyOpPin}, // retention_pinop.go
}

// applyPolicy writes src as the workspace's policy, by root.
func applyPolicy(t *testing.T, ctx context.Context, ws *workspace.Workspace, src string) {
	t.Helper()
	ctx = workspace.AsActor(ctx, "root") // a write acts only as its principal
	_, err := ws.Artifacts().Get(ctx, workspace.ByName(workspace.PolicyArtifact))
	if err == nil {
		_, err = ws.Artifacts().Update(ctx, as("root"), workspace.ByName(workspace.PolicyArtifact), workspace.ArtifactChange{Content: []byte(src)})
	} else {
		_, err = ws.Artifacts().Create(ctx, as("root"), workspace.NewArtifact{Name: workspace.PolicyArtifact, Kind: "policy", Content: []byte(src)})
	}
	require.NoError(t, err)
}

// requireForbidden checks err is the policy's refusal of action by actor.
func requireForbidden(t *testing.T, err error, actor, action, rule string) *workspace.ForbiddenError {
	t.Helper()
	require.ErrorIs(t, err, workspace.ErrForbidden)
	var fe *workspace.ForbiddenError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, actor, fe.Actor)
	assert.Equal(t, action, fe.Action)
	assert.Equal(t, rule, fe.Rule)
	assert.NotEmpty(t, fe.Reason)
	return fe
}

// deniedEvents returns the log's denied events.
func deniedEvents(t *testing.T, ctx context.Context, ws *workspace.Workspace) []workspace.Event {
	t.Helper()
	// Reads through a server always have a principal: read as root.
	page, err := ws.Events().Read(workspace.AsActor(ctx, "root"), workspace.EventQuery{Types: []string{workspace.EventDenied}})
	require.NoError(t, err)
	return page.Events
}

func testPolicyArtifacts(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	// No policy: everything allowed, as before.
	_, err := ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "plans/early.md", Content: []byte("x")})
	require.NoError(t, err)
	applyPolicy(t, ctx, ws, testPolicy)
	// Reads through a server always have a principal: read as root.
	rootCtx := workspace.AsActor(ctx, "root")

	_, err = ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "plans/p.md", Content: []byte("plan")})
	require.NoError(t, err)
	src, err := ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, as("root"), workspace.NewArtifact{Name: "secret/k", Content: []byte("k")})
	require.NoError(t, err)

	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "src/b.go", Content: []byte("no")})
	fe := requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	assert.Equal(t, "src/b.go", fe.Object)
	assert.Equal(t, []string{"planner"}, fe.Roles)
	_, err = ws.Artifacts().Get(rootCtx, workspace.ByName("src/b.go"))
	require.ErrorIs(t, err, workspace.ErrNotFound, "a refused write writes nothing")
	evs, err := ws.Events().Read(workspace.AsActor(ctx, "root"), workspace.EventQuery{AfterSeq: head})
	require.NoError(t, err)
	require.Len(t, evs.Events, 1, "only the denied event is logged")
	assert.Equal(t, workspace.EventDenied, evs.Events[0].Type)
	assert.Equal(t, "alice", evs.Events[0].Actor)
	assert.Equal(t, "src/b.go", evs.Events[0].Subject.Name)

	// Update by ID and rollback are writes of the artifact's name.
	_, err = ws.Artifacts().Update(ctx, as("alice"), workspace.ByID(src.ID), workspace.ArtifactChange{Content: []byte("x")})
	requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	_, err = ws.Artifacts().Update(ctx, as("bob"), workspace.ByID(src.ID), workspace.ArtifactChange{Content: []byte("package a // 2")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Rollback(ctx, as("alice"), workspace.ByName("src/a.go"), 1)
	requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	// Delete: bob's artifacts_delete is empty, alice's defaults to her writes.
	err = ws.Artifacts().Delete(ctx, as("bob"), workspace.ByName("src/a.go"))
	requireForbidden(t, err, "bob", "artifact.delete", "artifacts_delete")
	require.NoError(t, ws.Artifacts().Delete(ctx, as("alice"), workspace.ByName("plans/early.md")))

	// Reads: a listing leaves out what the actor may not read, a direct read is forbidden.
	bobCtx := workspace.AsActor(ctx, "bob")
	page, err := ws.Artifacts().List(bobCtx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	var names []string
	for _, a := range page.Artifacts {
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{workspace.PolicyArtifact, "plans/p.md", "src/a.go"}, names)
	_, err = ws.Artifacts().Get(bobCtx, workspace.ByName("secret/k"))
	requireForbidden(t, err, "bob", "artifact.read", "artifacts_read")
	_, err = ws.Artifacts().Versions(bobCtx, workspace.ByName("secret/k"))
	requireForbidden(t, err, "bob", "artifact.read", "artifacts_read")
	got, err := ws.Artifacts().Get(bobCtx, workspace.ByID(src.ID))
	require.NoError(t, err)
	assert.Equal(t, "src/a.go", got.Name)
	// Everyone may read the policy.
	_, err = ws.Artifacts().Get(bobCtx, workspace.ByName(workspace.PolicyArtifact))
	require.NoError(t, err)
	assert.NotEmpty(t, deniedEvents(t, ctx, ws))
}

func testPolicyNotes(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	_, err := ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "decision", Key: "db", Body: "postgres"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "constraint", Key: "x", Body: "no"})
	fe := requireForbidden(t, err, "alice", "note.write", "notes_write")
	assert.Equal(t, "constraint", fe.Object)
	_, err = ws.Notes().Put(ctx, as("root"), workspace.NotePut{Kind: "constraint", Key: "x", Body: "yes"})
	require.NoError(t, err)
	err = ws.Notes().Delete(ctx, as("bob"), "decision", "db")
	requireForbidden(t, err, "bob", "note.write", "notes_write")

	bobCtx := workspace.AsActor(ctx, "bob")
	page, err := ws.Notes().List(bobCtx, workspace.NoteFilter{})
	require.NoError(t, err)
	require.Len(t, page.Notes, 1)
	assert.Equal(t, "decision", page.Notes[0].Kind)
	_, err = ws.Notes().Get(bobCtx, "constraint", "x")
	requireForbidden(t, err, "bob", "note.read", "notes_read")
	_, err = ws.Notes().Get(workspace.AsActor(ctx, "alice"), "constraint", "x")
	require.NoError(t, err)
}

func testPolicyTasks(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	_, err := ws.Tasks().Create(ctx, as("bob"), workspace.NewTask{Title: "t0"})
	requireForbidden(t, err, "bob", "task.add", "tasks")
	task, err := ws.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t1"})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "alice"})
	requireForbidden(t, err, "alice", "task.claim", "tasks")
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, task.ID, claimed.ID)
	// Changing another's task needs "others"; finishing one's own, "finish".
	title := "renamed"
	_, err = ws.Tasks().Update(ctx, as("alice"), task.ID, workspace.TaskChange{Title: &title})
	requireForbidden(t, err, "alice", "task.others", "tasks")
	_, err = ws.Tasks().Update(ctx, as("lena"), task.ID, workspace.TaskChange{Title: &title})
	require.NoError(t, err)
	_, err = ws.Tasks().Complete(ctx, as("bob"), task.ID, workspace.TaskResult{Summary: "done"})
	require.NoError(t, err)

	// alice may add but not finish: she has no claim right, so she finishes
	// nothing of her own; another of hers fails as "finish".
	t2, err := ws.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t2"})
	require.NoError(t, err)
	_, err = ws.Tasks().Update(ctx, as("alice"), t2.ID, workspace.TaskChange{Title: &title})
	require.NoError(t, err, "the creator may edit her own unassigned task")
	cancelled := workspace.TaskCancelled
	_, err = ws.Tasks().Update(ctx, as("bob"), t2.ID, workspace.TaskChange{Status: &cancelled})
	requireForbidden(t, err, "bob", "task.others", "tasks")
}

func testPolicyLocks(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:src/a.go", Owner: "bob", TTL: time.Minute})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:docs/a.md", Owner: "bob", TTL: time.Minute})
	fe := requireForbidden(t, err, "bob", "lock", "locks")
	assert.Equal(t, "file:docs/a.md", fe.Object)
	err = ws.Locks().ForceRelease(ctx, as("alice"), "file:src/a.go")
	requireForbidden(t, err, "alice", "lock", "locks")
	_, err = ws.Locks().Get(workspace.AsActor(ctx, "root"), "file:src/a.go")
	require.NoError(t, err, "the refused force-release released nothing")
	_, err = ws.Locks().Renew(ctx, l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l))
}

func testPolicyAdmin(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	// Only the admin right changes the policy, whatever artifacts_write says.
	_, err := ws.Artifacts().Update(ctx, as("alice"), workspace.ByName(workspace.PolicyArtifact), workspace.ArtifactChange{Content: []byte("")})
	requireForbidden(t, err, "alice", "admin.policy", "admin")
	err = ws.Artifacts().Delete(ctx, as("bob"), workspace.ByName(workspace.PolicyArtifact))
	requireForbidden(t, err, "bob", "admin.policy", "admin")
	// A policy that does not parse, or that locks its author out, is refused.
	_, err = ws.Artifacts().Update(ctx, as("root"), workspace.ByName(workspace.PolicyArtifact), workspace.ArtifactChange{Content: []byte("[roles.x]\nfly = 1\n")})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = ws.Artifacts().Update(ctx, as("root"), workspace.ByName(workspace.PolicyArtifact), workspace.ArtifactChange{Content: []byte("[actors]\nroot = []\n")})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	// Note kind "token" holds a server's tokens: the admin "tokens" right
	// (a server refuses it before the engine does).
	_, err = ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "token", Key: "t1", Body: "{}"})
	require.ErrorIs(t, err, workspace.ErrForbidden)
	// Compacting is checked for the principal the context names.
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	err = ws.Events().Compact(workspace.AsActor(ctx, "bob"), head)
	requireForbidden(t, err, "bob", "admin.compact", "admin")
	require.NoError(t, ws.Events().Compact(workspace.AsActor(ctx, "lena"), head))
	// A rollback of the policy is a policy change like any other.
	applyPolicy(t, ctx, ws, testPolicy+"\n[roles.extra]\n")
	_, err = ws.Artifacts().Rollback(ctx, as("root"), workspace.ByName(workspace.PolicyArtifact), 1)
	require.NoError(t, err)
	// Deleting it: no policy, everything allowed again.
	require.NoError(t, ws.Artifacts().Delete(ctx, as("root"), workspace.ByName(workspace.PolicyArtifact)))
	_, err = ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "src/free.go", Content: []byte("x")})
	require.NoError(t, err)
}

func testPolicyBatch(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "alice", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "plans/ok.md", Content: []byte("ok")}},
		workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k", Body: "b"}},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "src/no.go", Content: []byte("no")}},
	}})
	var be *workspace.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 2, be.Index)
	requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	rootCtx := workspace.AsActor(ctx, "root")
	_, err = ws.Artifacts().Get(rootCtx, workspace.ByName("plans/ok.md"))
	require.ErrorIs(t, err, workspace.ErrNotFound, "the allowed ops of a refused batch are not written")
	_, err = ws.Notes().Get(rootCtx, "decision", "k")
	require.ErrorIs(t, err, workspace.ErrNotFound)
	evs, err := ws.Events().Read(workspace.AsActor(ctx, "root"), workspace.EventQuery{AfterSeq: head})
	require.NoError(t, err)
	require.Len(t, evs.Events, 1)
	assert.Equal(t, workspace.EventDenied, evs.Events[0].Type)
}

func testPolicyChangeSeen(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	dsn, a := fresh(t, h)
	b := open(t, dsn)
	// b has seen "no policy" before the change.
	_, err := b.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "src/before.go", Content: []byte("x")})
	require.NoError(t, err)
	_, err = b.Artifacts().List(workspace.AsActor(ctx, "bob"), workspace.ArtifactFilter{})
	require.NoError(t, err)
	applyPolicy(t, ctx, a, testPolicy)
	// The handle that changed it is bound at once.
	_, err = a.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "src/after.go", Content: []byte("x")})
	requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	// Another store's handle checks against a policy confirmed shortly
	// before each operation: it follows once its cache is older than that.
	require.Eventually(t, func() bool {
		_, err := b.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "src/after.go", Content: []byte("x")})
		return errors.Is(err, workspace.ErrForbidden)
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := b.Notes().Get(workspace.AsActor(ctx, "bob"), "constraint", "none")
		return errors.Is(err, workspace.ErrForbidden)
	}, 10*time.Second, 20*time.Millisecond)
}

// testPolicyChangeUnderWriters changes the policy on one handle while 8
// writers keep writing on another handle of their own store, which reads
// the policy at most once per period however many writers ask (see
// Options.PolicyRecheck). Every write that began more than the default
// PolicyRecheck after the change was acknowledged is refused, and every
// refusal is the policy's.
func testPolicyChangeUnderWriters(t *testing.T, h Harness) {
	const writers = 8
	ctx := caseCtx(t, time.Minute)
	dsn, a := fresh(t, h)
	b := open(t, dsn)
	type attempt struct {
		start time.Time
		err   error
	}
	var (
		mu       sync.Mutex
		attempts = make([][]attempt, writers)
		wrote    sync.WaitGroup
		done     = make(chan struct{})
	)
	wrote.Add(writers)
	var group sync.WaitGroup
	for w := range writers {
		group.Add(1)
		go func() {
			defer group.Done()
			ok := 0
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				_, err := b.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{
					Name: fmt.Sprintf("src/w%d-%d.go", w, n), Content: []byte("x")})
				mu.Lock()
				attempts[w] = append(attempts[w], attempt{start, err})
				mu.Unlock()
				if err == nil {
					if ok++; ok == 3 {
						wrote.Done()
					}
				} else if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wrote.Wait() // every writer has written under no policy
	applyPolicy(t, ctx, a, testPolicy)
	changed := time.Now() // the change is acknowledged
	bound := changed.Add(workspace.DefaultPolicyRecheck)
	// Each writer goes on until it has made a few attempts after the bound.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, as := range attempts {
			late := 0
			for _, at := range as {
				if at.start.After(bound) {
					late++
				}
			}
			if late < 3 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	close(done)
	group.Wait()
	for w, as := range attempts {
		refused := 0
		for _, at := range as {
			if at.err == nil {
				assert.False(t, at.start.After(bound), "writer %d: a write begun %v after the change was acknowledged succeeded", w, at.start.Sub(changed))
				continue
			}
			refused++
			requireForbidden(t, at.err, "alice", "artifact.write", "artifacts_write")
		}
		assert.NotZero(t, refused, "writer %d", w)
	}
}

// seedReads writes, under testPolicy, records bob (implementer: reads
// src/** and plans/**, notes of kind decision) may read and records he may
// not, with a denied event about one of the latter. It returns the head.
func seedReads(t *testing.T, ctx context.Context, ws *workspace.Workspace) int64 {
	t.Helper()
	applyPolicy(t, ctx, ws, testPolicy)
	_, err := ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "plans/p.md", Content: []byte("plan")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, as("root"), workspace.NewArtifact{Name: "secret/k", Content: []byte("k")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, as("root"), workspace.ByName("secret/k"), workspace.ArtifactChange{Content: []byte("k2")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "decision", Key: "db", Body: "postgres"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, as("root"), workspace.NotePut{Kind: "constraint", Key: "x", Body: "hidden"})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "secret/z", Content: []byte("no")})
	requireForbidden(t, err, "alice", "artifact.write", "artifacts_write")
	_, err = ws.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t1"})
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	return head
}

// requireBobMayRead checks that every event is one bob may read.
func requireBobMayRead(t *testing.T, evs []workspace.Event) {
	t.Helper()
	for _, e := range evs {
		assert.NotContains(t, e.Subject.Name, "secret/", "event %d about a record bob may not read", e.Seq)
		assert.NotEqual(t, "constraint/x", e.Subject.ID, "event %d about a note bob may not read", e.Seq)
	}
}

func testPolicyEventReads(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	head := seedReads(t, ctx, ws)
	all, err := ws.Events().Read(workspace.AsActor(ctx, "root"), workspace.EventQuery{})
	require.NoError(t, err)
	require.Len(t, all.Events, int(head), "root reads every event")

	bob := workspace.AsActor(ctx, "bob")
	page, err := ws.Events().Read(bob, workspace.EventQuery{})
	require.NoError(t, err)
	requireBobMayRead(t, page.Events)
	var seen []string
	for _, e := range page.Events {
		seen = append(seen, e.Type+" "+e.Subject.Name)
	}
	assert.Equal(t, []string{"artifact.created " + workspace.PolicyArtifact, "artifact.created plans/p.md",
		"artifact.created src/a.go", "note.put db", "task.created t1"}, seen)
	assert.Equal(t, head, page.Head)
	assert.Equal(t, head, page.Next, "the cursor moves past the left-out events")

	// Whatever the query names, what bob may not read stays out.
	for _, q := range []workspace.EventQuery{
		{SubjectName: "secret/k"},
		{SubjectKind: workspace.SubjectArtifact, Actor: "root"},
		{SubjectKind: workspace.SubjectNote, SubjectID: "constraint/x"},
		{Types: []string{workspace.EventDenied}},
	} {
		p, err := ws.Events().Read(bob, q)
		require.NoError(t, err)
		requireBobMayRead(t, p.Events)
		if q.SubjectName != "" || q.SubjectID != "" || len(q.Types) > 0 {
			assert.Empty(t, p.Events, "%+v", q)
		}
		assert.Equal(t, head, p.Next)
	}

	// Page by page: a page may hold fewer than its limit (none at all),
	// with Next still advancing; following Next reads the same events.
	var paged []workspace.Event
	short := false
	for after := int64(0); after < head; {
		p, err := ws.Events().Read(bob, workspace.EventQuery{AfterSeq: after, Limit: 2})
		require.NoError(t, err)
		require.Greater(t, p.Next, after, "the cursor always advances")
		short = short || len(p.Events) < 2 && p.Next < head
		paged = append(paged, p.Events...)
		after = p.Next
	}
	assert.Equal(t, page.Events, paged)
	assert.True(t, short, "some page was short for the left-out events")

	// Resuming from the seq of a left-out event reads on from there.
	p, err := ws.Events().Read(bob, workspace.EventQuery{AfterSeq: all.Events[2].Seq})
	require.NoError(t, err)
	requireBobMayRead(t, p.Events)
	require.NotEmpty(t, p.Events)
	assert.Greater(t, p.Events[0].Seq, all.Events[2].Seq)
}

func testPolicySubscription(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	head := seedReads(t, ctx, ws)
	sub, err := ws.Events().Subscribe(workspace.AsActor(ctx, "bob"), workspace.SubscribeRequest{Heartbeat: 50 * time.Millisecond})
	require.NoError(t, err)
	defer sub.Close()
	// Live events after the backlog: one bob may not read, then one he may.
	secret, err := ws.Artifacts().Update(ctx, as("root"), workspace.ByName("secret/k"), workspace.ArtifactChange{Content: []byte("k3")})
	require.NoError(t, err)
	_ = secret
	secretSeq, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	var got []workspace.Event
	progressPast := false
	timeout := time.After(30 * time.Second)
	for !progressPast {
		select {
		case m, ok := <-sub.C():
			require.True(t, ok, "the stream ended: %v", sub.Err())
			if m.Progress {
				progressPast = m.Head >= secretSeq
				continue
			}
			got = append(got, m.Event)
		case <-timeout:
			t.Fatalf("no progress past seq %d; got %d events", secretSeq, len(got))
		}
	}
	requireBobMayRead(t, got)
	require.Len(t, got, 5, "the backlog bob may read, and nothing of the live secret")
	assert.Less(t, got[len(got)-1].Seq, head+1)
	_, err = ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "src/b.go", Content: []byte("package a")})
	require.NoError(t, err)
	select {
	case m := <-sub.C():
		for m.Progress {
			m = <-sub.C()
		}
		assert.Equal(t, "src/b.go", m.Event.Subject.Name)
		assert.Equal(t, secretSeq+1, m.Event.Seq)
	case <-timeout:
		t.Fatal("the event bob may read did not arrive")
	}
}

func testPolicyStatus(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	head := seedReads(t, ctx, ws)
	root, err := ws.Status(workspace.AsActor(ctx, "root"))
	require.NoError(t, err)
	require.Len(t, root.RecentEvents, int(head))
	bob, err := ws.Status(workspace.AsActor(ctx, "bob"))
	require.NoError(t, err)
	requireBobMayRead(t, bob.RecentEvents)
	assert.Len(t, bob.RecentEvents, 5)
	// Counts are numbers: they name nothing, and stay whole.
	assert.Equal(t, root.Artifacts, bob.Artifacts)
	assert.Equal(t, root.Notes, bob.Notes)
	assert.Equal(t, head, bob.Head)
}

func testPolicyExport(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	seedReads(t, ctx, ws)
	var buf bytes.Buffer
	_, err := ws.Export(workspace.AsActor(ctx, "bob"), &buf, workspace.ArchiveOptions{})
	requireForbidden(t, err, "bob", "admin.export", "admin")
	assert.Zero(t, buf.Len(), "a refused export writes nothing")
	_, err = ws.Export(workspace.AsActor(ctx, "root"), &buf, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), "secret/k", "an export is whole")
	// A denied event records the refusal.
	var denied []string
	for _, e := range deniedEvents(t, ctx, ws) {
		denied = append(denied, e.Actor+" "+e.Subject.ID)
	}
	assert.Contains(t, denied, "bob admin.export")
}

// testPolicyGCAndVerify: gc removes what writers wrote, as a compaction
// does, and verify reads every record, as an export does: a caller with a
// principal needs admin.compact for the one and admin.export for the
// other. A refused gc removes nothing.
func testPolicyGCAndVerify(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	seedReads(t, ctx, ws)
	drop := workspace.GCPolicy{KeepEvents: 1, KeepVersions: 1}
	first := func() int64 {
		st, err := ws.Status(workspace.AsActor(ctx, "root"))
		require.NoError(t, err)
		return st.Floor
	}
	require.Equal(t, int64(1), first())

	drop.Actor = "bob"
	_, err := ws.GC(workspace.AsActor(ctx, "bob"), drop)
	requireForbidden(t, err, "bob", "admin.compact", "admin")
	assert.Equal(t, int64(1), first(), "a refused gc removes nothing")
	_, err = ws.Verify(workspace.AsActor(ctx, "bob"))
	requireForbidden(t, err, "bob", "admin.export", "admin")
	_, err = ws.Verify(workspace.AsActor(ctx, "lena"))
	requireForbidden(t, err, "lena", "admin.export", "admin")

	var denied []string
	for _, e := range deniedEvents(t, ctx, ws) {
		denied = append(denied, e.Actor+" "+e.Subject.ID)
	}
	assert.Contains(t, denied, "bob admin.compact")
	assert.Contains(t, denied, "lena admin.export")

	r, err := ws.Verify(workspace.AsActor(ctx, "root"))
	require.NoError(t, err)
	assert.True(t, r.OK(), "%+v", r)
	drop.Actor = "lena"
	rep, err := ws.GC(workspace.AsActor(ctx, "lena"), drop)
	require.NoError(t, err, "lena's role has admin compact")
	assert.Positive(t, rep.Events.Count)
	assert.Greater(t, first(), int64(1))
}

// testPolicyReplay: a request replayed with its idempotency key after its
// actor lost the right is refused (not answered with the first result),
// writes nothing, and says the first request committed.
func testPolicyReplay(t *testing.T, h Harness) {
	ctx := caseCtx(t, time.Minute)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, testPolicy)
	rootCtx := workspace.AsActor(ctx, "root")
	w := workspace.Write{Actor: "bob", IdempotencyKey: "k1"}
	first, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	require.NoError(t, err)
	again, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	require.NoError(t, err, "while the right holds, a replay returns the first result")
	assert.Equal(t, first.ID, again.ID)
	batch := workspace.Batch{Actor: "bob", IdempotencyKey: "k2", Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName("src/a.go"), Change: workspace.ArtifactChange{Content: []byte("package a // 2")}},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "src/b.go", Content: []byte("package a")}},
	}}
	_, err = ws.Commit(ctx, batch)
	require.NoError(t, err)

	// bob loses the write right on src/**.
	applyPolicy(t, ctx, ws, strings.Replace(testPolicy, `artifacts_write = ["src/**"]`, `artifacts_write = ["tests/**"]`, 1))
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	fe := requireForbidden(t, err, "bob", "artifact.write", "artifacts_write")
	assert.Contains(t, fe.Reason, "committed earlier")
	_, err = ws.Commit(ctx, batch)
	var be *workspace.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 0, be.Index)
	fe = requireForbidden(t, err, "bob", "artifact.write", "artifacts_write")
	assert.Contains(t, fe.Reason, "committed earlier")

	// Nothing was written but the refusals; the first writes stand.
	evs, err := ws.Events().Read(rootCtx, workspace.EventQuery{AfterSeq: head})
	require.NoError(t, err)
	require.Len(t, evs.Events, 2)
	for _, e := range evs.Events {
		assert.Equal(t, workspace.EventDenied, e.Type)
	}
	a, err := ws.Artifacts().Get(rootCtx, workspace.ByName("src/a.go"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), a.Version)
	// A right regained makes the replay answer again, with the first result.
	applyPolicy(t, ctx, ws, testPolicy)
	again, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), again.Version)
}
