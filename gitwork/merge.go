package gitwork

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// A merger's one invariant: the integration branch moves only by a
// compare-and-swap from the commit the merger validated on to the
// validated candidate, in one git ref transaction that also verifies the
// fence ref still holds this merger's token. So the branch is always at
// an old commit or at a fully validated new one, and a merger that lost
// its lease cannot move it once its successor has written its fence.

// QueueResource is the lock that elects the merger of an integration branch.
func QueueResource(integration string) string { return "merge-queue:" + integration }

// fenceRef holds a blob naming the fencing token of the merger in charge.
func fenceRef(integration string) string { return "refs/agentspace/merge-fence/" + integration }

// ErrLeaseLost is returned by a merger that lost the queue's lease.
var ErrLeaseLost = errors.New("merger lost the queue's lease")

// Merger works through the merge queue of one integration branch.
type Merger struct {
	m     *Manager
	actor string
	owner string // the lease's owner: actor plus this process and merger, so two mergers never share it
	lease workspace.Lease
	fence string // the blob id our fence ref points at
	// roles are the merger actor's roles under the policy when Run began,
	// checked for the lease, whose owner names this process too; nil: no
	// policy, or the context's principal decides.
	roles []string
	// Hooks for crash tests: a no-op unless set.
	step func(name string)
	// pollOnly: follow by polling every legacyPoll, not the event stream.
	pollOnly bool

	mu   sync.Mutex
	lost error
}

// Result is what one queue entry came to.
type Result struct {
	Task   string `json:"task"`
	Status Status `json:"status"`
	Commit string `json:"commit,omitempty"` // the integration commit, when merged
	Detail string `json:"detail,omitempty"`
}

// NewMerger returns a merger acting as actor. It takes the lease on Run.
func (m *Manager) NewMerger(actor string) *Merger {
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := fmt.Sprintf("%s#%d-%x", actor, os.Getpid(), b)
	return &Merger{m: m, actor: actor, owner: owner, step: func(string) {}}
}

// SetStepHook calls fn at each named step of a merge (for crash tests).
func (mg *Merger) SetStepHook(fn func(step string)) { mg.step = fn }

// SetPollOnly makes a following merger look at the queue every 500 ms
// instead of waking on the event stream: how it followed before, kept to
// measure the two against each other.
func (mg *Merger) SetPollOnly(on bool) { mg.pollOnly = on }

// Run takes the queue's lease (waiting for another merger to let go),
// then merges entries in submission order. With follow false it returns
// once the queue is empty; with follow it waits for more until ctx ends,
// woken by each submission's event (Events.Subscribe), and looks at the
// queue every Config.FollowPoll besides.
// report, if not nil, is called with each entry's result.
func (mg *Merger) Run(ctx context.Context, follow bool, report func(Result)) error {
	if err := mg.leaseRoles(ctx); err != nil {
		return fmt.Errorf("merge queue: %w", err)
	}
	lease, err := mg.m.ws.Locks().Acquire(mg.leaseCtx(ctx), workspace.AcquireRequest{
		Resource: QueueResource(mg.m.cfg.Integration), Owner: mg.owner, TTL: mg.m.cfg.LeaderTTL, Wait: true,
		Message: "merge queue leader",
	})
	if err != nil {
		return fmt.Errorf("merge queue: %w", err)
	}
	mg.lease = lease
	defer func() {
		_ = mg.m.ws.Locks().Release(mg.leaseCtx(context.WithoutCancel(ctx)), mg.currentLease())
	}()
	if err := mg.writeFence(ctx); err != nil {
		return err
	}
	if err := mg.removeStaleCheckouts(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go mg.keepLease(ctx, cancel, done)

	var wake <-chan struct{}
	poll := mg.m.cfg.FollowPoll
	if follow {
		if mg.pollOnly {
			poll = legacyPoll
		} else {
			// Watch from the head as it is now, ahead of the first
			// pass, so that a submission made during a pass wakes the
			// next one.
			head, err := mg.m.ws.Events().Head(ctx)
			if err != nil {
				return err
			}
			var watching sync.WaitGroup
			wake = mg.watch(ctx, head, &watching)
			defer func() { cancel(nil); watching.Wait() }()
		}
	}
	for {
		n, err := mg.pass(ctx, report)
		if err != nil {
			if lost := mg.lostErr(); lost != nil {
				return lost
			}
			return err
		}
		if !follow {
			return nil
		}
		if n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			if lost := mg.lostErr(); lost != nil {
				return lost
			}
			return nil
		case <-wake:
		case <-time.After(poll):
		}
	}
}

// legacyPoll is how often a following merger looked at the queue before it
// followed the event stream (kept for SetPollOnly, to measure against).
const legacyPoll = 500 * time.Millisecond

// submittedMsg starts the event message of a submission.
const submittedMsg = "submitted "

// watch follows the workspace's event stream from after seq and signals
// the returned channel (coalesced) on every submission to the queue. A
// stream that ends (a remote workspace gone, the log compacted past it) is
// followed again from the head, after one wake in case it missed one; the
// merger's slow safety poll covers the time in between.
func (mg *Merger) watch(ctx context.Context, after int64, wg *sync.WaitGroup) <-chan struct{} {
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	q := workspace.EventQuery{Types: []string{workspace.EventNotePut}, SubjectKind: string(workspace.SubjectNote)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			q.AfterSeq = after
			sub, err := mg.m.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: q})
			if err == nil {
				for msg := range sub.C() {
					if msg.Progress {
						continue
					}
					after = msg.Event.Seq
					if strings.HasPrefix(msg.Event.Subject.ID, NoteKind+"/") && strings.HasPrefix(msg.Event.Message, submittedMsg) {
						signal()
					}
				}
				_ = sub.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if head, err := mg.m.ws.Events().Head(ctx); err == nil && head > after {
				after = head
				signal()
			}
		}
	}()
	return wake
}

func (mg *Merger) currentLease() workspace.Lease {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.lease
}

func (mg *Merger) lostErr() error {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.lost
}

// keepLease renews the lease at a third of its TTL; once it cannot, it
// cancels the merger's work.
func (mg *Merger) keepLease(ctx context.Context, cancel context.CancelCauseFunc, done chan struct{}) {
	t := time.NewTicker(mg.m.cfg.LeaderTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if err := mg.renew(ctx); err != nil {
				cancel(err)
				return
			}
		}
	}
}

// renew extends the lease; an error means this merger must not move the branch.
func (mg *Merger) renew(ctx context.Context) error {
	l, err := mg.m.ws.Locks().Renew(mg.leaseCtx(ctx), mg.currentLease(), mg.m.cfg.LeaderTTL)
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if err != nil {
		if mg.lost == nil {
			mg.lost = fmt.Errorf("%w: %w", ErrLeaseLost, err)
		}
		return mg.lost
	}
	if l.Token != mg.lease.Token {
		mg.lost = fmt.Errorf("%w: token %d became %d", ErrLeaseLost, mg.lease.Token, l.Token)
		return mg.lost
	}
	mg.lease = l
	return nil
}

// writeFence points the fence ref at a blob naming our token, unless a
// newer token is there already (then we were overtaken before we began).
func (mg *Merger) writeFence(ctx context.Context) error {
	g := mg.m.git
	ref := fenceRef(mg.m.cfg.Integration)
	old := ""
	if out, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref); err == nil {
		old = strings.TrimSpace(out)
		body, err := g.run(ctx, "cat-file", "blob", old)
		if err != nil {
			return err
		}
		var tok int64
		if _, err := fmt.Sscanf(body, "token %d", &tok); err == nil && tok > mg.lease.Token {
			return fmt.Errorf("%w: the fence holds token %d, newer than ours (%d)", ErrLeaseLost, tok, mg.lease.Token)
		}
	}
	body := fmt.Sprintf("token %d\nowner %s\n", mg.lease.Token, strings.ReplaceAll(mg.owner, "\n", " "))
	blob, err := g.runIn(ctx, []byte(body), "hash-object", "-w", "--stdin")
	if err != nil {
		return err
	}
	mg.fence = strings.TrimSpace(blob)
	args := []string{"update-ref", "-m", "merge queue token " + strconv.FormatInt(mg.lease.Token, 10), "--end-of-options", ref, mg.fence}
	if old != "" {
		args = append(args, old)
	} else {
		args = append(args, strings.Repeat("0", len(mg.fence)))
	}
	// A merger that lost the lease may hold the ref's lock for a moment
	// (its last, failing, transaction): try again briefly.
	for try := 0; ; try++ {
		_, err := g.run(ctx, args...)
		if err == nil {
			return nil
		}
		cur, _ := g.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref)
		if strings.TrimSpace(cur) != old || try == 5 {
			return fmt.Errorf("%w: the fence ref moved: %w", ErrLeaseLost, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeStaleCheckouts removes the temporary checkouts a merger that died
// left behind: with the lease held, no other merger is using one.
func (mg *Merger) removeStaleCheckouts(ctx context.Context) error {
	out, err := mg.m.git.runWorktrees(ctx, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return err
	}
	for _, field := range strings.Split(out, "\x00") {
		path, ok := strings.CutPrefix(field, "worktree ")
		if !ok || !strings.HasPrefix(filepath.Base(path), checkoutPrefix) {
			continue
		}
		_, _ = mg.m.git.run(ctx, "worktree", "remove", "--force", "--force", "--", path)
		_ = os.RemoveAll(path)
	}
	_, err = mg.m.git.run(ctx, "worktree", "prune")
	return err
}

// pass merges the queue as it stands; it returns how many entries it took up.
func (mg *Merger) pass(ctx context.Context, report func(Result)) (int, error) {
	recs, err := List(ctx, mg.m.ws)
	if err != nil {
		return 0, err
	}
	n := 0
	// Entries a merger that died left merged or merging are finished first.
	for _, st := range []Status{StatusMerged, StatusMerging, StatusSubmitted} {
		for _, rec := range recs {
			if rec.Status != st {
				continue
			}
			// Read it again: its agent or a merger may have moved it since.
			rec, err := get(ctx, mg.m.ws, rec.Task)
			if err != nil || rec.Status != st {
				continue
			}
			n++
			var res Result
			if st == StatusMerged {
				res, err = mg.finishRecorded(ctx, rec)
			} else {
				res, err = mg.merge(ctx, rec)
			}
			if report != nil && res.Task != "" {
				report(res)
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// merge takes one entry from submitted (or merging) to merged, conflicted
// or failed.
func (mg *Merger) merge(ctx context.Context, rec Worktree) (Result, error) {
	m := mg.m
	g := m.git
	integ := "refs/heads/" + m.cfg.Integration
	// The record names the branch and commits: git must confirm them
	// before anything is built from them.
	p, err := m.confirm(ctx, rec)
	if err == nil {
		err = m.confirmCommits(ctx, rec, p)
	}
	if err == nil && p.head == "" {
		err = &RecordError{Task: rec.Task, Field: "branch", Value: rec.Branch, Reason: "is gone"}
	}
	if res, ok, rerr := mg.rejected(ctx, rec, err); ok {
		return res, rerr
	}
	for attempt := 0; ; attempt++ {
		old, err := g.revParse(ctx, integ)
		if err != nil {
			return Result{}, err
		}
		msg := "merging onto " + short(old)
		if rec.Status == StatusMerging && attempt == 0 {
			// A merger stopped mid-entry: if the branch took its
			// candidate, finish; else build it again.
			if rec.Candidate != "" {
				if in, err := g.isAncestor(ctx, rec.Candidate, old); err != nil {
					return Result{}, err
				} else if in {
					return mg.landed(ctx, rec, rec.Candidate, "finished after a merger stopped: the branch already holds it", false)
				}
			}
			rec.Detail = fmt.Sprintf("retried: %s stopped before it landed", orSomeone(rec.Merger))
			msg += "; " + rec.Detail
		} else if rec.Detail != "" {
			msg += "; " + rec.Detail
		}
		if attempt > m.cfg.MaxRetries {
			rec.Status, rec.Detail = StatusSubmitted, fmt.Sprintf("%s moved %d times while merging; left in the queue", m.cfg.Integration, attempt)
			_, err := put(ctx, m.ws, mg.actor, rec, rec.Detail)
			return Result{Task: rec.Task, Status: StatusSubmitted, Detail: rec.Detail}, err
		}
		rec.Status, rec.Merger, rec.Onto, rec.Candidate = StatusMerging, mg.actor, old, ""
		rec.Attempts++
		if rec, err = put(ctx, m.ws, mg.actor, rec, msg); err != nil {
			return Result{}, err
		}
		mg.step("merging")
		files, err := mg.conflicts(ctx, old, rec.Head)
		if err != nil {
			return Result{}, err
		}
		if len(files) > 0 {
			return mg.giveBack(ctx, rec, StatusConflicted, "conflicting files: "+strings.Join(files, ", "), files...)
		}
		cand, why, err := mg.build(ctx, rec, old)
		if err != nil {
			return Result{}, err
		}
		if cand == "" {
			return mg.giveBack(ctx, rec, StatusConflicted, why)
		}
		// The policy is checked first: it is cheap, and no command need run
		// for work that may not land.
		changed, err := mg.changedPaths(ctx, old, cand)
		if err != nil {
			return Result{}, err
		}
		refused, why, err := mg.policyRefusals(ctx, rec, changed)
		if err != nil {
			return Result{}, err
		}
		if len(refused) > 0 {
			return mg.giveBack(ctx, rec, StatusFailed, why, refused...)
		}
		rec.Candidate = cand
		if rec, err = put(ctx, m.ws, mg.actor, rec, "validating "+short(cand)); err != nil {
			return Result{}, err
		}
		mg.step("validating")
		ok, out, err := mg.validate(ctx, cand)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return mg.giveBack(ctx, rec, StatusFailed, out)
		}
		mg.step("validated")
		moved, err := mg.advance(ctx, old, cand)
		var ce *CheckoutError
		if errors.As(err, &ce) {
			// Not the entry's fault: it waits in the queue for the
			// checkout to be cleaned up.
			rec.Status, rec.Candidate, rec.Detail = StatusSubmitted, "", "waiting: "+ce.Error()
			if _, perr := put(ctx, m.ws, mg.actor, rec, firstLine(rec.Detail)); perr != nil {
				return Result{}, perr
			}
			return Result{Task: rec.Task, Status: StatusSubmitted, Detail: rec.Detail}, err
		}
		if err != nil {
			return Result{}, err
		}
		if !moved {
			rec.Detail = fmt.Sprintf("%s moved from %s while validating: rebuilt and revalidated", m.cfg.Integration, short(old))
			continue
		}
		mg.step("advanced")
		return mg.landed(ctx, rec, cand, "merged as "+short(cand), true)
	}
}

// conflicts pre-checks the merge of head into old without a checkout and
// returns the conflicting files (none: it merges cleanly).
func (mg *Merger) conflicts(ctx context.Context, old, head string) ([]string, error) {
	out, err := mg.m.git.run(ctx, "merge-tree", "--write-tree", "--name-only", "--no-messages", "--end-of-options", old, head)
	switch exitCode(err) {
	case -1:
		if err != nil {
			return nil, err
		}
		return nil, nil
	case 1:
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var files []string
		for _, l := range lines[1:] {
			if l != "" {
				files = append(files, l)
			}
		}
		if len(files) == 0 {
			files = []string{"(unnamed conflict)"}
		}
		return files, nil
	}
	return nil, err
}

// build makes the candidate commit of rec on old. An empty candidate
// with a reason means the branch does not apply.
func (mg *Merger) build(ctx context.Context, rec Worktree, old string) (cand, why string, err error) {
	g := mg.m.git
	if ff, err := g.isAncestor(ctx, old, rec.Head); err != nil {
		return "", "", err
	} else if ff {
		return rec.Head, "", nil
	}
	if mg.m.cfg.Mode == ModeMerge {
		out, err := g.run(ctx, "merge-tree", "--write-tree", "--no-messages", "--end-of-options", old, rec.Head)
		if err != nil {
			return "", "", err
		}
		tree := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
		c, err := g.run(ctx, "commit-tree", "-p", old, "-p", rec.Head, "-m", "Merge "+rec.Branch+" (task "+rec.Task+")", "--end-of-options", tree)
		return strings.TrimSpace(c), "", err
	}
	// Rebase: replay base..head onto old in a detached temporary worktree.
	return withCheckout(ctx, g, rec.Head, func(dir string) (string, string, error) {
		wg := git{dir: dir, env: []string{"GIT_COMMITTER_NAME=agentspace merge queue", "GIT_COMMITTER_EMAIL=merge-queue@agentspace.invalid"}}
		mb, err := g.run(ctx, "merge-base", "--end-of-options", old, rec.Head)
		if err != nil {
			return "", "", err
		}
		if _, err := wg.run(ctx, "rebase", "--quiet", "--no-autosquash", "--onto", old, "--end-of-options", strings.TrimSpace(mb)); err != nil {
			_, _ = wg.run(context.WithoutCancel(ctx), "rebase", "--abort")
			return "", "rebase stopped: " + err.Error(), nil
		}
		head, err := wg.run(ctx, "rev-parse", "HEAD")
		return strings.TrimSpace(head), "", err
	})
}

// checkoutPrefix names the merger's temporary checkouts.
const checkoutPrefix = "agentspace-merge-"

// withCheckout runs fn in a temporary detached worktree at commit, and
// removes it after.
func withCheckout(ctx context.Context, g git, commit string, fn func(dir string) (string, string, error)) (string, string, error) {
	dir, err := os.MkdirTemp("", checkoutPrefix)
	if err != nil {
		return "", "", err
	}
	defer func() {
		if _, err := g.run(context.WithoutCancel(ctx), "worktree", "remove", "--force", "--force", "--", dir); err != nil {
			_ = os.RemoveAll(dir)
			_, _ = g.run(context.WithoutCancel(ctx), "worktree", "prune")
		}
	}()
	if _, err := g.runWorktrees(ctx, "worktree", "add", "--quiet", "--detach", "--", dir, commit); err != nil {
		return "", "", err
	}
	return fn(dir)
}

// advance moves the integration branch from old to cand if it is still at
// old and the fence still holds our token; false if the branch moved.
func (mg *Merger) advance(ctx context.Context, old, cand string) (bool, error) {
	if err := mg.renew(ctx); err != nil {
		return false, err
	}
	// The remaining window: the lease could lapse between this renew and
	// the ref transaction below. The fence ref closes it for any successor
	// that has written its fence; one that has not yet cannot have moved
	// the branch either, so the branch still goes old -> validated cand.
	// A checkout of the branch must take the move without losing a change.
	checkouts, err := mg.m.integrationCheckouts(ctx)
	if err != nil {
		return false, err
	}
	for _, dir := range checkouts {
		if err := mg.m.checkoutFollows(ctx, dir, old, cand, true); err != nil {
			return false, err
		}
	}
	_, err = mg.m.git.runIn(ctx, []byte(mg.moveTx(old, cand)), "update-ref", "--stdin")
	if err == nil {
		for i, dir := range checkouts {
			if cerr := mg.m.checkoutFollows(ctx, dir, old, cand, false); cerr != nil {
				// Changed since the dry run: put everything back.
				return false, mg.undoAdvance(ctx, old, cand, checkouts[:i], cerr)
			}
		}
		return true, nil
	}
	fence, ferr := mg.m.git.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", fenceRef(mg.m.cfg.Integration))
	if ferr != nil || strings.TrimSpace(fence) != mg.fence {
		mg.mu.Lock()
		mg.lost = fmt.Errorf("%w: another merger's fence is on %s", ErrLeaseLost, mg.m.cfg.Integration)
		mg.mu.Unlock()
		return false, mg.lostErr()
	}
	cur, rerr := mg.m.git.revParse(ctx, "refs/heads/"+mg.m.cfg.Integration)
	if rerr == nil && cur != old {
		return false, nil
	}
	return false, err
}

// moveTx is the ref transaction that moves the integration branch from
// old to next if the fence still holds this merger's token.
func (mg *Merger) moveTx(old, next string) string {
	return fmt.Sprintf("start\nverify %s %s\nupdate refs/heads/%s %s %s\ncommit\n",
		fenceRef(mg.m.cfg.Integration), mg.fence, mg.m.cfg.Integration, next, old)
}

// undoAdvance moves the integration branch back from cand to old, and the
// checkouts already updated with it, after a checkout refused to follow
// (cause). It returns cause, or why the undo failed too.
func (mg *Merger) undoAdvance(ctx context.Context, old, cand string, updated []string, cause error) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := mg.m.git.runIn(ctx, []byte(mg.moveTx(cand, old)), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("gitwork: %v; and moving %s back to %s failed, so it stays at %s: %w", cause, mg.m.cfg.Integration, short(old), short(cand), err)
	}
	for _, dir := range updated {
		if err := mg.m.checkoutFollows(ctx, dir, cand, old, false); err != nil {
			return fmt.Errorf("gitwork: %v; and %s could not be put back at %s: %w", cause, dir, short(old), err)
		}
	}
	return cause
}

// landed records a merged entry and finishes it. ours: this merger has
// just moved the branch to commit; otherwise the record's claim that the
// branch holds the entry is checked first.
func (mg *Merger) landed(ctx context.Context, rec Worktree, commit, msg string, ours bool) (Result, error) {
	rec.Status, rec.Merged, rec.Detail = StatusMerged, commit, ""
	if !ours {
		if res, ok, err := mg.rejected(ctx, rec, mg.m.confirmMerged(ctx, rec)); ok {
			return res, err
		}
	}
	rec, err := put(ctx, mg.m.ws, mg.actor, rec, msg)
	if err != nil {
		return Result{}, err
	}
	mg.step("recorded")
	return mg.finish(ctx, rec)
}

// finishRecorded finishes an entry a record says is merged (a merger
// stopped after recording it), once git confirms the integration branch
// holds it.
func (mg *Merger) finishRecorded(ctx context.Context, rec Worktree) (Result, error) {
	if res, ok, err := mg.rejected(ctx, rec, mg.m.confirmMerged(ctx, rec)); ok {
		return res, err
	}
	return mg.finish(ctx, rec)
}

// rejected turns a *RecordError into the entry's failure, recorded as
// such and touching nothing else (no task is changed or made on the
// record's word); ok is false for any other err, which the caller handles.
func (mg *Merger) rejected(ctx context.Context, rec Worktree, err error) (res Result, ok bool, _ error) {
	var re *RecordError
	if !errors.As(err, &re) {
		if err != nil {
			return Result{}, true, err
		}
		return Result{}, false, nil
	}
	rec.Status, rec.Candidate, rec.Detail = StatusFailed, "", re.Error()
	if _, err := put(ctx, mg.m.ws, mg.actor, rec, "failed: "+firstLine(re.Error())); err != nil {
		return Result{}, true, err
	}
	return Result{Task: rec.Task, Status: StatusFailed, Detail: rec.Detail}, true, nil
}

// finish completes a merged entry's task on its agent's behalf and
// removes its worktree and branch. A merger that stopped before doing so
// leaves the record merged, and the next one finishes it.
func (mg *Merger) finish(ctx context.Context, rec Worktree) (Result, error) {
	m := mg.m
	p, err := m.confirm(ctx, rec)
	if err == nil {
		err = m.confirmCommits(ctx, rec, p)
	}
	if res, ok, err := mg.rejected(ctx, rec, err); ok {
		return res, err
	}
	t, err := m.ws.Tasks().Get(ctx, rec.Task)
	if err == nil && t.Status == workspace.TaskInProgress {
		_, err = m.ws.Tasks().Complete(ctx, workspace.Write{Actor: t.Assignee, Message: "merged by " + mg.actor + " as " + short(rec.Merged)},
			rec.Task, workspace.TaskResult{Summary: "merged into " + m.cfg.Integration + " as " + rec.Merged, Artifacts: []string{rec.Patch}})
	}
	detail := ""
	if err != nil {
		detail = "task not completed: " + err.Error()
	}
	if rec.PerAgent {
		why := "released after merge"
		if s := m.settleAgent(ctx, rec, p); s != "" {
			why += "; " + s
		}
		rec.Status = StatusReleased
		if _, perr := put(ctx, m.ws, mg.actor, rec, why); perr != nil {
			detail = strings.TrimPrefix(detail+"; release failed: "+perr.Error(), "; ")
		}
		return Result{Task: rec.Task, Status: StatusMerged, Commit: rec.Merged, Detail: detail}, nil
	}
	if _, rerr := m.releaseAt(ctx, mg.actor, rec, p, "released after merge"); rerr != nil {
		detail = strings.TrimPrefix(detail+"; release failed: "+rerr.Error(), "; ")
	}
	return Result{Task: rec.Task, Status: StatusMerged, Commit: rec.Merged, Detail: detail}, nil
}

// giveBack records a conflicted or failed entry: the task stays with its
// agent, its result says what came back and what to do next, and with
// OnConflictTask a new task is made to resolve it, whose areas are the
// conflicting files.
func (mg *Merger) giveBack(ctx context.Context, rec Worktree, st Status, detail string, files ...string) (Result, error) {
	m := mg.m
	rec.Status, rec.Detail, rec.Candidate = st, detail, ""
	rec, err := put(ctx, m.ws, mg.actor, rec, fmt.Sprintf("%s: %s", st, firstLine(detail)))
	if err != nil {
		return Result{}, err
	}
	res := Result{Task: rec.Task, Status: st, Detail: detail}
	t, terr := m.ws.Tasks().Get(ctx, rec.Task)
	if terr == nil && t.Status == workspace.TaskInProgress {
		summary := fmt.Sprintf("The merge queue gave this task back (%s): %s\nNext: %s", st, rec.Why(), rec.Next(m.cfg.Integration))
		_, terr = m.ws.Tasks().Update(ctx, workspace.Write{Actor: mg.actor, Message: "merge " + string(st) + ": back to its agent"}, rec.Task,
			workspace.TaskChange{Result: &workspace.TaskResult{Summary: summary, Artifacts: []string{rec.Patch}}})
	}
	if terr != nil {
		res.Detail += "\n(the task's result was not updated: " + terr.Error() + ")"
	}
	if m.cfg.OnConflict == OnConflictTask {
		_, err := m.ws.Tasks().Create(ctx, workspace.Write{Actor: mg.actor, Message: "merge " + string(st)}, workspace.NewTask{
			Title:       fmt.Sprintf("Resolve: %s (%s)", t.Title, st),
			Description: fmt.Sprintf("The branch %s of task %s did not merge into %s:\n\n%s", rec.Branch, rec.Task, m.cfg.Integration, detail),
			ParentID:    rec.Task, Priority: t.Priority, Labels: map[string]string{"merge": string(st)}, Areas: areasOf(files),
		})
		if err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// areasOf keeps the files that are valid task areas.
func areasOf(files []string) []string {
	var out []string
	for _, f := range files {
		if workspace.ValidateName(strings.TrimSuffix(f, "/")) == nil && len(out) < workspace.MaxAreas {
			out = append(out, f)
		}
	}
	return out
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func orSomeone(s string) string {
	if s == "" {
		return "a merger"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
