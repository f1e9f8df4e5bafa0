package shadow

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// checkpointEnv is an env on the store dsn, with a real directory holding
// a.txt and b.txt, and a shadow of it opened by bob.
func checkpointEnv(t *testing.T, dsn string) (*env, Shadow) {
	t.Helper()
	ws := openDSN(t, dsn)
	base := t.TempDir()
	m, err := New(ws, Options{Root: filepath.Join(base, "shadows")})
	require.NoError(t, err)
	dir := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(dir, 0o755))
	e := &env{ctx: caseCtx(t), dsn: dsn, ws: ws, m: m, root: m.opts.Root, dir: dir}
	write(t, e.dir, map[string]string{"a.txt": "a", "b.txt": "b"})
	return e, e.open(t, "bob", "")
}

// agentSaw is what the agent goroutine saw while paused.
type agentSaw struct {
	pause    workspace.Msg
	writeErr error // its artifact write while paused
	err      error
}

// actAsAgent runs bob as an agent would: it waits on its inbox for what it
// owes, tries a write (refused while paused), and acks the pause with a
// reply. The channel gets what it saw once it acked.
func actAsAgent(ctx context.Context, ws *workspace.Workspace, actor string) <-chan agentSaw {
	out := make(chan agentSaw, 1)
	go func() {
		var saw agentSaw
		defer func() { out <- saw }()
		page, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unacked: true, Wait: true})
		if err != nil {
			saw.err = err
			return
		}
		saw.pause = page.Messages[0]
		_, saw.writeErr = ws.Artifacts().Create(ctx, workspace.Write{Actor: actor}, workspace.NewArtifact{Name: "notes/while-paused", Content: []byte("x")})
		_, saw.err = ws.Messages().Ack(ctx, workspace.Write{Actor: actor}, saw.pause.ID, "stopped")
	}()
	return out
}

// inboxTypes lists the types of actor's messages, oldest first.
func inboxTypes(t *testing.T, ws *workspace.Workspace, actor string) []string {
	t.Helper()
	page, err := ws.Messages().Inbox(caseCtx(t), workspace.InboxQuery{Actor: actor})
	require.NoError(t, err)
	var out []string
	for _, m := range page.Messages {
		out = append(out, m.Type)
	}
	return out
}

// requireWrites checks that actor's writes are taken (the pause is lifted).
func requireWrites(t *testing.T, ws *workspace.Workspace, actor string) {
	t.Helper()
	_, err := ws.Artifacts().Create(caseCtx(t), workspace.Write{Actor: actor}, workspace.NewArtifact{Name: "src/back-" + newID(), Content: []byte("back")})
	require.NoError(t, err)
}

func TestCheckpointPausesTheAgentUntilItAcksThenPromotesAndResumes(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		e, s := checkpointEnv(t, dsn)
		write(t, s.Path, map[string]string{"a.txt": "A", "c.txt": "new"})
		agent := actAsAgent(e.ctx, e.ws, "bob")
		var steps []string
		cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{
			AckTimeout: time.Hour, // the agent acks: the wait ends on its ack, never on this
			Progress:   func(step string, _ Checkpoint) { steps = append(steps, step) },
		})
		require.NoError(t, err)
		saw := <-agent
		require.NoError(t, saw.err)

		// While paused, the agent's write was refused, typed; the pause it
		// acked is the checkpoint's.
		var pe *workspace.PausedError
		require.ErrorAs(t, saw.writeErr, &pe)
		assert.ErrorIs(t, saw.writeErr, workspace.ErrPaused)
		assert.Equal(t, "lead", pe.By)
		assert.Equal(t, cp.PauseMessage, saw.pause.ID)
		assert.Equal(t, "pause", saw.pause.Type)

		assert.Equal(t, []string{StepPaused, StepAck, StepValidated, StepPromoted, StepNotified, StepResumed}, steps)
		assert.True(t, cp.Acked)
		require.NotNil(t, cp.Ack)
		assert.Equal(t, "bob", cp.Ack.By)
		assert.Equal(t, "stopped", cp.Ack.Reply)
		assert.False(t, cp.WasPaused)
		require.NotNil(t, cp.Validation)
		assert.True(t, cp.Validation.Passed)
		assert.Equal(t, "bob", cp.Validation.Actor, "validated as the agent's work")
		assert.Equal(t, OutcomePromoted, cp.Outcome)
		require.NotNil(t, cp.Promotion)
		assert.Len(t, cp.Promotion.Diff.Changes, 2)
		assert.True(t, cp.Resumed)
		assert.Equal(t, "644:A", tree(t, e.dir)["a.txt"])
		assert.Equal(t, "644:new", tree(t, e.dir)["c.txt"])

		// The outcome: an info message that needs no ack, with the promotion.
		require.NotNil(t, cp.Notice)
		n := *cp.Notice
		assert.Equal(t, MsgPromoted, n.Type)
		assert.Equal(t, workspace.SeverityInfo, n.Severity)
		assert.False(t, n.RequiresAck)
		assert.Equal(t, "lead", n.From)
		assert.Equal(t, []string{"bob"}, n.To)
		var data map[string]any
		require.NoError(t, json.Unmarshal(n.Data, &data))
		assert.Equal(t, s.ID, data["shadow"])
		assert.Equal(t, cp.Promotion.ID, data["promotion"])
		assert.EqualValues(t, 2, data["changes"])

		// Resumed: the agent writes again, and was told in order.
		requireWrites(t, e.ws, "bob")
		assert.Equal(t, []string{"pause", MsgPromoted, "resume"}, inboxTypes(t, e.ws, "bob"))
		shadowSteps := messages(t, e.ws, NoteKind)
		assert.Contains(t, shadowSteps[len(shadowSteps)-1], EventPromoted)
	})
}

func TestCheckpointGoesOnWhenTheAgentDoesNotAckInTime(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	write(t, s.Path, map[string]string{"a.txt": "A"})
	// Nobody acts as bob: the wait can only end at its timeout.
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.False(t, cp.Acked)
	assert.Nil(t, cp.Ack)
	assert.Equal(t, OutcomePromoted, cp.Outcome)
	assert.True(t, cp.Resumed)
	assert.Equal(t, "644:A", tree(t, e.dir)["a.txt"])

	pause, err := e.ws.Messages().Get(e.ctx, cp.PauseMessage)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob"}, pause.Pending, "still owed: the checkpoint did not ack for bob")
	assert.False(t, pause.Deadline.IsZero(), "the pause's deadline is the ack timeout: it escalates")
	requireWrites(t, e.ws, "bob")
}

// violatingShadow opens bob's shadow changing b.txt, leased by carol (a
// violation), and adding c.txt (none).
func violatingShadow(t *testing.T, dsn string) (*env, Shadow) {
	t.Helper()
	e, s := checkpointEnv(t, dsn)
	_, err := e.ws.Locks().Acquire(e.ctx, workspace.AcquireRequest{Resource: "file:b.txt", Owner: "carol", TTL: time.Hour})
	require.NoError(t, err)
	write(t, s.Path, map[string]string{"b.txt": "B", "c.txt": "new"})
	return e, s
}

// requireNotice checks the outcome message and returns its data.
func requireNotice(t *testing.T, e *env, cp Checkpoint, typ, severity string) noticeData {
	t.Helper()
	require.NotNil(t, cp.Notice)
	n, err := e.ws.Messages().Get(e.ctx, cp.Notice.ID)
	require.NoError(t, err)
	assert.Equal(t, typ, n.Type)
	assert.Equal(t, severity, n.Severity)
	assert.True(t, n.RequiresAck)
	assert.Equal(t, []string{"bob"}, n.Pending)
	assert.Contains(t, n.Body, "What to do: ack this message")
	assert.Contains(t, n.Body, "lease b.txt: file:b.txt is leased by carol")
	var d noticeData
	require.NoError(t, json.Unmarshal(n.Data, &d))
	assert.Equal(t, cp.Shadow, d.Shadow)
	require.Len(t, d.Violations, 1)
	assert.Equal(t, Violation{Rule: RuleLease, Path: "b.txt", Detail: d.Violations[0].Detail}, d.Violations[0])
	// The agent's ack of it is recorded once.
	acked, err := e.ws.Messages().Ack(e.ctx, workspace.Write{Actor: "bob"}, n.ID, "understood")
	require.NoError(t, err)
	assert.Empty(t, acked.Pending)
	return d
}

func TestCheckpointDiscardsAnInvalidShadowWholeAndTellsTheAgent(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		e, s := violatingShadow(t, dsn)
		cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: time.Millisecond})
		require.NoError(t, err)
		assert.Equal(t, OutcomeDiscarded, cp.Outcome)
		require.NotNil(t, cp.Validation)
		assert.False(t, cp.Validation.Passed)
		require.NotNil(t, cp.Discarded)
		assert.True(t, cp.Discarded.Removed)
		assert.NoDirExists(t, s.Path)
		assert.Equal(t, map[string]string{"a.txt": "644:a", "b.txt": "644:b"}, tree(t, e.dir), "nothing promoted")

		d := requireNotice(t, e, cp, MsgDiscarded, workspace.SeverityError)
		assert.Equal(t, []string{"b.txt", "c.txt"}, d.Reverted)
		assert.Zero(t, d.Kept)
		assert.True(t, cp.Resumed)
		requireWrites(t, e.ws, "bob")
		assert.Equal(t, []string{"pause", MsgDiscarded, "resume"}, inboxTypes(t, e.ws, "bob"))
	})
}

func TestCheckpointRevertsOnlyTheViolatingPaths(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		e, s := violatingShadow(t, dsn)
		cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: time.Millisecond, OnlyViolations: true})
		require.NoError(t, err)
		assert.Equal(t, OutcomeReverted, cp.Outcome)
		require.NotNil(t, cp.Discarded)
		assert.Equal(t, []string{"b.txt"}, cp.Discarded.Reverted)
		assert.Equal(t, 1, cp.Kept)
		assert.Equal(t, map[string]string{"a.txt": "644:a", "b.txt": "644:b"}, tree(t, e.dir), "nothing promoted")

		// The shadow keeps c.txt and is back to the real b.txt.
		left, err := e.m.Diff(e.ctx, s.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"c.txt"}, left.Paths())
		assert.Equal(t, "644:b", tree(t, s.Path)["b.txt"])

		d := requireNotice(t, e, cp, MsgPartialRevert, workspace.SeverityWarning)
		assert.Equal(t, []string{"b.txt"}, d.Reverted)
		assert.Equal(t, 1, d.Kept)
		assert.True(t, cp.Resumed)
		requireWrites(t, e.ws, "bob")
	})
}

func TestCheckpointRevertingEveryChangeIsAnError(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	_, err := e.ws.Locks().Acquire(e.ctx, workspace.AcquireRequest{Resource: "file:b.txt", Owner: "carol", TTL: time.Hour})
	require.NoError(t, err)
	write(t, s.Path, map[string]string{"b.txt": "B"})
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: time.Millisecond, OnlyViolations: true})
	require.NoError(t, err)
	assert.Zero(t, cp.Kept)
	assert.Equal(t, MsgPartialRevert, cp.Notice.Type)
	assert.Equal(t, workspace.SeverityError, cp.Notice.Severity, "nothing of the agent's work was kept")
}

func TestCheckpointResumesTheAgentWhenAStepFails(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	write(t, s.Path, map[string]string{"a.txt": "mine"})
	write(t, e.dir, map[string]string{"a.txt": "theirs"}) // the promotion will conflict
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: time.Millisecond})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"a.txt"}, ce.Paths)
	assert.Empty(t, cp.Outcome)
	assert.Nil(t, cp.Notice)
	assert.True(t, cp.Resumed)
	requireWrites(t, e.ws, "bob")

	// The agent learns why from the resume message.
	page, err := e.ws.Messages().Inbox(e.ctx, workspace.InboxQuery{Actor: "bob"})
	require.NoError(t, err)
	require.Len(t, page.Messages, 2)
	resume := page.Messages[1]
	assert.Equal(t, "resume", resume.Type)
	assert.Contains(t, resume.Body, "checkpoint of shadow "+s.ID+" stopped")
	assert.Contains(t, resume.Body, "a.txt")
	assert.Equal(t, "644:theirs", tree(t, e.dir)["a.txt"])
}

func TestCheckpointResumesTheAgentWhenItsContextIsCancelled(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	_, err := e.m.Checkpoint(ctx, s.ID, "lead", CheckpointOptions{
		AckTimeout: time.Hour,
		Progress: func(step string, _ Checkpoint) {
			if step == StepPaused {
				cancel() // the caller gives up while waiting for the ack
			}
		},
	})
	require.ErrorIs(t, err, context.Canceled)
	requireWrites(t, e.ws, "bob")
	assert.Equal(t, []string{"pause", "resume"}, inboxTypes(t, e.ws, "bob"))
	_, err = e.m.Get(e.ctx, s.ID)
	assert.NoError(t, err, "the shadow is untouched")
}

func TestCheckpointLeavesAPauseItDidNotMake(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	write(t, s.Path, map[string]string{"a.txt": "A"})
	res, err := e.ws.Commit(e.ctx, workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "bob"}}})
	require.NoError(t, err)
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{AckTimeout: time.Millisecond})
	require.NoError(t, err)
	assert.True(t, cp.WasPaused)
	assert.Equal(t, res.Results[0].Msg.ID, cp.PauseMessage)
	assert.Equal(t, OutcomePromoted, cp.Outcome)
	assert.False(t, cp.Resumed)
	_, err = e.ws.Notes().Put(e.ctx, workspace.Write{Actor: "bob"}, workspace.NotePut{Kind: "log", Key: "k", Body: "b"})
	assert.ErrorIs(t, err, workspace.ErrPaused, "root's pause stays")
}

func TestCheckpointRefusesBadInputAndWritesNothing(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	head := headOf(t, e.ws)
	for _, c := range []struct {
		name, ref, operator string
		opts                CheckpointOptions
		want                error
	}{
		{"no operator", s.ID, "", CheckpointOptions{}, workspace.ErrInvalid},
		{"the agent itself", s.ID, "bob", CheckpointOptions{}, workspace.ErrInvalid},
		{"the agent under another name", s.ID, "bob#2", CheckpointOptions{}, workspace.ErrInvalid},
		{"negative timeout", s.ID, "lead", CheckpointOptions{AckTimeout: -time.Second}, workspace.ErrInvalid},
		{"timeout over the limit", s.ID, "lead", CheckpointOptions{AckTimeout: workspace.MaxTTL + time.Second}, workspace.ErrInvalid},
		{"unknown shadow", "0123456789abcdef01234567", "lead", CheckpointOptions{}, workspace.ErrNotFound},
		{"not a shadow id", "../etc", "lead", CheckpointOptions{}, workspace.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.m.Checkpoint(e.ctx, c.ref, c.operator, c.opts)
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, head, headOf(t, e.ws), "nothing written")
		})
	}
}

func TestCheckpointNeedsTheOperatorsAdminRight(t *testing.T) {
	e := policyEnv(t)
	write(t, e.dir, map[string]string{"src/a.go": "a"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"src/a.go": "A"})
	head := headOf(t, e.ws)

	_, err := e.m.Checkpoint(e.ctx, s.ID, "carol", CheckpointOptions{AckTimeout: time.Millisecond})
	require.ErrorIs(t, err, workspace.ErrForbidden)
	evs := eventsAfter(t, e.ws, head)
	require.Len(t, evs, 1, "only the refusal is recorded: alice is not paused")
	assert.Equal(t, workspace.EventDenied, evs[0].Type)
	requireWrites(t, e.ws, "alice")
	head = headOf(t, e.ws)

	// An admin's checkpoint checks alice's diff against alice's roles.
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "root", CheckpointOptions{AckTimeout: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, OutcomePromoted, cp.Outcome)
	assert.Equal(t, "644:A", tree(t, e.dir)["src/a.go"])
	assert.True(t, cp.Resumed)
	types := []string{}
	for _, ev := range eventsAfter(t, e.ws, head) {
		types = append(types, ev.Type)
	}
	assert.Contains(t, types, workspace.EventActorPaused)
	assert.Contains(t, types, workspace.EventActorResumed)
}

func TestCheckpointNoticeFitsAMessageWhateverTheViolations(t *testing.T) {
	long := make([]Violation, 400)
	paths := make([]string, 400)
	for i := range long {
		paths[i] = filepath.Join("dir", string(rune('a'+i%26)), "file\x1b[31m"+string(rune('A'+i%26))+".txt")
		long[i] = Violation{Rule: RuleCommand, Detail: string(make([]byte, 2000))}
	}
	n := discardedNotice(Shadow{ID: "s", Actor: "bob", Dir: "/d", Path: "/p"}, "lead", Validation{Violations: long}, paths)
	assert.LessOrEqual(t, len(n.Data), maxNoticeData)
	var d noticeData
	require.NoError(t, json.Unmarshal(n.Data, &d))
	assert.True(t, d.Truncated)
	assert.NotEmpty(t, d.Reverted)
	assert.Contains(t, n.Body, "… and 380 more")
	assert.NotContains(t, n.Body, "\x1b", "control characters are quoted")
	assert.NotContains(t, n.Body, "\x00")
}

func TestCheckpointTellsAnAgentSomeoneElseResumedMeanwhile(t *testing.T) {
	e, s := checkpointEnv(t, backends[0].newDSN(t))
	write(t, s.Path, map[string]string{"a.txt": "A"})
	cp, err := e.m.Checkpoint(e.ctx, s.ID, "lead", CheckpointOptions{
		AckTimeout: time.Millisecond,
		Progress: func(step string, _ Checkpoint) {
			if step == StepPromoted { // another operator lifts the pause before the outcome is sent
				_, err := e.ws.Commit(e.ctx, workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "bob"}}})
				require.NoError(t, err)
			}
		},
	})
	require.NoError(t, err)
	assert.False(t, cp.Resumed, "root resumed bob, not the checkpoint")
	require.NotNil(t, cp.Notice)
	assert.Equal(t, []string{"pause", "resume", MsgPromoted}, inboxTypes(t, e.ws, "bob"))
	requireWrites(t, e.ws, "bob")
}
