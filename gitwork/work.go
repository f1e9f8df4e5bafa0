package gitwork

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentspace/agentspace/workspace"
)

// Manager hands out worktrees for tasks and records them in a workspace.
// It is safe for use by one goroutine at a time; many Managers, in many
// processes, may share one repository and workspace.
type Manager struct {
	ws  *workspace.Workspace
	cfg Config
	git git // in the repository's common directory's top
}

// ErrDirty is returned by Submit for a worktree with uncommitted changes.
var ErrDirty = errors.New("worktree has uncommitted changes")

// ErrTaskEnded is matched by the error of Start and Submit for a task
// that is done or cancelled: there is nothing left to do in its worktree
// but release it. That error also matches workspace.ErrConflict.
var ErrTaskEnded = errors.New("task ended")

// taskEndedError says which task ended, how and by whom.
type taskEndedError struct{ task, status, by string }

func (e *taskEndedError) Error() string {
	return fmt.Sprintf("task %s was %s by %s: nothing is left to do in it", e.task, e.status, e.by)
}

func (e *taskEndedError) Is(target error) bool {
	return target == ErrTaskEnded || target == workspace.ErrConflict
}

// New checks git's version and the repository and returns a Manager.
func New(ctx context.Context, ws *workspace.Workspace, cfg Config) (*Manager, error) {
	if _, err := CheckGitVersion(ctx); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := git{dir: cfg.Repo}
	// The common directory names the main repository even from a worktree.
	common, err := g.run(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("gitwork: %s is not a git repository: %w", cfg.Repo, err)
	}
	g.dir = strings.TrimSpace(common)
	if _, err := g.revParse(ctx, "refs/heads/"+cfg.Integration); err != nil {
		return nil, fmt.Errorf("gitwork: integration branch %q: %w", cfg.Integration, err)
	}
	m := &Manager{ws: ws, cfg: cfg, git: g}
	// The main working tree: the common directory's parent in the usual
	// layout, else the first worktree git lists.
	top := filepath.Dir(g.dir)
	if filepath.Base(g.dir) != ".git" {
		wts, err := m.worktrees(ctx)
		if err != nil || len(wts) == 0 {
			return nil, fmt.Errorf("gitwork: %s: listing its worktrees: %v", cfg.Repo, err)
		}
		top = wts[0].path
	}
	if m.cfg, err = cfg.rootUnder(top); err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns the configuration in effect, defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// shortID is the random tail of a task's UUIDv7: its head is a timestamp
// that tasks made in the same minute share.
func shortID(task string) string { return strings.ReplaceAll(task, "-", "")[20:] }

// checkTask accepts a task id only if it is a UUID: nothing else reaches
// a path or a branch name.
func checkTask(task string) error {
	if u, err := uuid.Parse(task); err != nil || len(task) != 36 || u.String() != task {
		return invalid("task", "%q is not a task id (a lower-case UUID)", task)
	}
	return nil
}

// claimedBy returns the task if actor holds its live claim.
func (m *Manager) claimedBy(ctx context.Context, actor, task string) (workspace.Task, error) {
	t, err := m.ws.Tasks().Get(ctx, task)
	if err != nil {
		return t, err
	}
	switch {
	case t.Status == workspace.TaskCancelled || t.Status == workspace.TaskDone:
		return t, &taskEndedError{task: task, status: string(t.Status), by: t.UpdatedBy}
	case t.Status == workspace.TaskPending:
		return t, fmt.Errorf("task %s is pending: %q does not hold it (a stop, a release or an expired claim gives a claim back): claim it again: %w", task, actor, workspace.ErrNotHolder)
	case t.Status != workspace.TaskInProgress:
		return t, fmt.Errorf("task %s is %s: claim it first: %w", task, t.Status, workspace.ErrNotHolder)
	case t.Assignee != actor:
		return t, fmt.Errorf("task %s is claimed by %q, not %q: %w", task, t.Assignee, actor, workspace.ErrNotHolder)
	}
	return t, nil
}

// Start makes a worktree for task, which actor must have claimed, on a new
// branch from the integration branch's head, and records it. Started
// again, it returns the existing worktree. With Config.PerAgent it is
// StartPerAgent.
func (m *Manager) Start(ctx context.Context, actor, task string) (Worktree, error) {
	if m.cfg.PerAgent {
		return m.StartPerAgent(ctx, actor, task)
	}
	if err := checkTask(task); err != nil {
		return Worktree{}, err
	}
	if _, err := m.claimedBy(ctx, actor, task); err != nil {
		return Worktree{}, err
	}
	rec, started, err := m.started(ctx, task)
	if started || err != nil {
		return rec, err
	}
	short := shortID(task)
	path := filepath.Join(m.cfg.Root, short)
	branch := m.cfg.BranchPrefix + short
	if err := CheckBranch(branch); err != nil {
		return rec, err
	}
	base, err := m.git.revParse(ctx, "refs/heads/"+m.cfg.Integration)
	if err != nil {
		return rec, err
	}
	if err := os.MkdirAll(m.cfg.Root, 0o750); err != nil {
		return rec, fmt.Errorf("gitwork: %w", err)
	}
	if err := m.git.addWorktree(ctx, path, branch, base); err != nil {
		// A Start that died before recording its worktree left it behind:
		// adopt it, based where its branch left the integration branch.
		cur, herr := git{dir: path}.run(ctx, "symbolic-ref", "--quiet", "HEAD")
		if herr != nil || strings.TrimSpace(cur) != "refs/heads/"+branch {
			return rec, fmt.Errorf("gitwork: creating the worktree of task %s: %w", task, err)
		}
		mb, merr := m.git.run(ctx, "merge-base", "--end-of-options", "refs/heads/"+branch, "refs/heads/"+m.cfg.Integration)
		if merr != nil {
			return rec, merr
		}
		base = strings.TrimSpace(mb)
	}
	w := Worktree{Task: task, Agent: actor, Path: path, Branch: branch, Base: base, Status: StatusActive, Version: rec.Version}
	rec, err = put(ctx, m.ws, actor, w, "worktree created at "+path)
	if err != nil {
		// Unrecorded, the worktree would be invisible to gc: take it back.
		if p, cerr := m.confirm(context.WithoutCancel(ctx), w); cerr == nil {
			_ = m.removeWorktree(context.WithoutCancel(ctx), p)
		}
		return rec, err
	}
	return rec, nil
}

// dirty lists the uncommitted changes (untracked files included) in a worktree.
func dirty(ctx context.Context, path string) (string, error) {
	out, err := git{dir: path}.run(ctx, "status", "--porcelain", "--untracked-files=all")
	return strings.TrimSpace(out), err
}

// PatchName is the artifact that holds a submission's diff.
func PatchName(task string) string { return "worktrees/" + task + ".patch" }

// Submit queues task's worktree for the merger: it refuses one with
// uncommitted changes (ErrDirty) or no commits, stores git diff
// base...head as a patch artifact linked to the task, and extends the
// task's claim while it waits in the queue.
func (m *Manager) Submit(ctx context.Context, actor, task string) (Worktree, error) {
	if err := checkTask(task); err != nil {
		return Worktree{}, err
	}
	if _, err := m.claimedBy(ctx, actor, task); err != nil {
		return Worktree{}, err
	}
	rec, err := get(ctx, m.ws, task)
	if err != nil {
		return rec, err
	}
	switch rec.Status {
	case StatusActive, StatusConflicted, StatusFailed:
	default:
		return rec, fmt.Errorf("task %s: worktree is %s, not active: %w", task, rec.Status, workspace.ErrConflict)
	}
	p, err := m.confirm(ctx, rec)
	if err != nil {
		return rec, err
	}
	if !p.exists || p.head == "" {
		return rec, fmt.Errorf("task %s: its worktree %s or branch %s is gone: release it and start again: %w", task, p.path, p.branch, workspace.ErrConflict)
	}
	changes, err := dirty(ctx, p.path)
	if err != nil {
		return rec, err
	}
	if changes != "" {
		return rec, fmt.Errorf("%w in %s: commit or remove them first:\n%s", ErrDirty, p.path, changes)
	}
	head := p.head
	if rec.PerAgent {
		// The commits since the last point the integration branch holds.
		if rec.Base, err = m.mergeBase(ctx, p.branch); err != nil {
			return rec, err
		}
	} else if checkCommit("base", rec.Base) != nil {
		return rec, &RecordError{Task: task, Field: "base", Value: rec.Base, Reason: "is not a full commit id"}
	} else if in, err := m.git.isAncestor(ctx, rec.Base, head); err != nil || !in {
		return rec, &RecordError{Task: task, Field: "base", Value: rec.Base, Reason: "is not an ancestor of " + p.branch}
	}
	if head == rec.Base {
		return rec, invalid("worktree", "branch %s has no commits beyond its base %s: nothing to submit", rec.Branch, rec.Base[:12])
	}
	patch, err := m.git.run(ctx, "diff", "--binary", "--end-of-options", rec.Base+"..."+head)
	if err != nil {
		return rec, err
	}
	if err := m.putPatch(ctx, actor, task, []byte(patch)); err != nil {
		return rec, err
	}
	if _, err := m.ws.Tasks().Heartbeat(ctx, workspace.Write{Actor: actor, Message: "submitted for merge"}, task, m.cfg.QueueLease); err != nil {
		return rec, err
	}
	rec.Status, rec.Head, rec.Patch, rec.Detail = StatusSubmitted, head, PatchName(task), ""
	rec.Candidate, rec.Onto = "", ""
	rec.SubmittedAt = time.Now().UTC()
	// The put is conditional on rec.Version, so it writes the next one;
	// its event's seq orders the queue.
	rec.SubmitVersion = rec.Version + 1
	return put(ctx, m.ws, actor, rec, submittedMsg+head[:12])
}

func (m *Manager) putPatch(ctx context.Context, actor, task string, patch []byte) error {
	name := PatchName(task)
	w := workspace.Write{Actor: actor, Message: "patch of task " + task}
	_, err := m.ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: name})
	switch {
	case err == nil:
		_, err = m.ws.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: name}, workspace.ArtifactChange{Content: patch})
	case isNotFound(err):
		_, err = m.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: name, Kind: "patch", Content: patch, ContentType: "text/x-diff", TaskID: task})
	}
	return err
}

// Release removes task's worktree and branch and records it released (a
// per-agent worktree and branch stay: the record alone is released).
// Work that is not on the integration branch is kept first under
// refs/agentspace/backup/<short id> (uncommitted and untracked files in
// one extra commit), which the record names. Only the task's agent may
// release an active worktree; any actor may release one whose task ended.
// A record that git does not confirm is refused with a *RecordError and
// nothing is removed (see Forget).
func (m *Manager) Release(ctx context.Context, actor, task string) (Worktree, error) {
	rec, err := m.releasable(ctx, actor, task)
	if err != nil || rec.Status == StatusReleased {
		return rec, err
	}
	return m.release(ctx, actor, rec, "released")
}

// releasable returns task's record if actor may release it.
func (m *Manager) releasable(ctx context.Context, actor, task string) (Worktree, error) {
	if err := checkTask(task); err != nil {
		return Worktree{}, err
	}
	rec, err := get(ctx, m.ws, task)
	if err != nil || rec.Status == StatusReleased {
		return rec, err
	}
	if rec.Status == StatusSubmitted || rec.Status == StatusMerging {
		return rec, fmt.Errorf("task %s: worktree is %s: the merge queue owns it: %w", task, rec.Status, workspace.ErrConflict)
	}
	t, err := m.ws.Tasks().Get(ctx, task)
	if err != nil && !isNotFound(err) {
		return rec, err
	}
	if err == nil && t.Status == workspace.TaskInProgress && t.Assignee != actor && time.Now().Before(t.LeaseExpiresAt) {
		return rec, fmt.Errorf("task %s is claimed by %q: only its agent releases its worktree: %w", task, t.Assignee, workspace.ErrNotHolder)
	}
	return rec, nil
}

// release removes what the machinery made for rec, once git confirms it
// (a *RecordError, and nothing done, if not), and records it released.
func (m *Manager) release(ctx context.Context, actor string, rec Worktree, why string) (Worktree, error) {
	p, err := m.confirm(ctx, rec)
	if err != nil {
		return rec, err
	}
	return m.releaseAt(ctx, actor, rec, p, why)
}

// releaseAt is release of rec, whose worktree confirm has just found at p.
func (m *Manager) releaseAt(ctx context.Context, actor string, rec Worktree, p place, why string) (Worktree, error) {
	backup, err := m.backup(ctx, rec, p)
	if err != nil {
		return rec, err
	}
	// An agent's own worktree outlives the task: only the record goes.
	if !rec.PerAgent {
		if err := m.removeWorktree(ctx, p); err != nil {
			return rec, err
		}
	}
	rec.Status, rec.Backup = StatusReleased, backup
	msg := why
	if backup != "" {
		msg += "; unmerged work kept at " + backup
	}
	return put(ctx, m.ws, actor, rec, msg)
}

// backup keeps the worktree's work that the integration branch lacks
// under a ref, and returns the ref ("" when there is nothing to keep).
func (m *Manager) backup(ctx context.Context, rec Worktree, p place) (string, error) {
	head := p.head // "": the branch is gone already
	if p.exists {
		// Snapshot uncommitted and untracked files in a private index.
		changes, err := dirty(ctx, p.path)
		if err != nil {
			return "", err
		}
		if changes != "" && head != "" {
			idx := filepath.Join(os.TempDir(), "agentspace-backup-"+shortID(rec.Task)+".idx")
			defer os.Remove(idx)
			wg := git{dir: p.path, env: []string{"GIT_INDEX_FILE=" + idx}}
			if _, err := wg.run(ctx, "read-tree", "--end-of-options", head); err != nil {
				return "", err
			}
			if _, err := wg.run(ctx, "add", "-A", "--", "."); err != nil {
				return "", err
			}
			tree, err := wg.run(ctx, "write-tree")
			if err != nil {
				return "", err
			}
			c, err := wg.run(ctx, "commit-tree", "-p", head, "-m", "agentspace: uncommitted work of task "+rec.Task, "--end-of-options", strings.TrimSpace(tree))
			if err != nil {
				return "", err
			}
			head = strings.TrimSpace(c)
		}
	}
	if head == "" {
		return "", nil
	}
	merged, err := m.git.isAncestor(ctx, head, "refs/heads/"+m.cfg.Integration)
	if err != nil || merged {
		return "", err
	}
	ref := "refs/agentspace/backup/" + shortID(rec.Task)
	if _, err := m.git.run(ctx, "update-ref", "-m", "agentspace backup", "--end-of-options", ref, head); err != nil {
		return "", err
	}
	return ref, nil
}

// removeWorktree removes the confirmed worktree p and deletes its branch
// if it is still at the commit confirm saw; either may be gone already.
func (m *Manager) removeWorktree(ctx context.Context, p place) error {
	if p.exists {
		if _, err := m.git.run(ctx, "worktree", "remove", "--force", "--force", "--", p.path); err != nil {
			return err
		}
	} else if _, err := m.git.run(ctx, "worktree", "prune"); err != nil {
		// The directory is gone: forget its registration.
		return err
	}
	if p.head == "" {
		return nil
	}
	if _, err := m.git.run(ctx, "update-ref", "-d", "--end-of-options", p.ref, p.head); err != nil && exitCode(err) < 0 {
		return err
	}
	return nil
}

// GC releases worktrees whose task ended, or whose claim lapsed (or task
// went back to pending) longer than Config.GCAge ago. A live claim is
// never reaped, nor a worktree the merge queue holds. It returns the
// released records. A record that git does not confirm (see RecordError)
// is left alone and gc goes on with the others; the error then joins one
// *RecordError per such record.
func (m *Manager) GC(ctx context.Context, actor string) ([]Worktree, error) {
	recs, err := List(ctx, m.ws)
	if err != nil {
		return nil, err
	}
	var (
		out     []Worktree
		skipped []error
	)
	now := time.Now()
	for _, rec := range recs {
		switch rec.Status {
		case StatusReleased, StatusSubmitted, StatusMerging:
			continue
		}
		t, err := m.ws.Tasks().Get(ctx, rec.Task)
		var why string
		switch {
		case isNotFound(err):
			why = "gc: task is gone"
		case err != nil:
			return out, err
		case t.Status == workspace.TaskDone || t.Status == workspace.TaskCancelled || t.Status == workspace.TaskFailed:
			why = "gc: task " + string(t.Status)
		case t.Status == workspace.TaskInProgress && t.Assignee == rec.Agent && !t.LeaseExpiresAt.IsZero() && now.Sub(t.LeaseExpiresAt) > m.cfg.GCAge:
			why = "gc: claim lapsed at " + t.LeaseExpiresAt.Format(time.RFC3339)
		case (t.Status != workspace.TaskInProgress || t.Assignee != rec.Agent) && now.Sub(t.UpdatedAt) > m.cfg.GCAge:
			why = "gc: task left its agent at " + t.UpdatedAt.Format(time.RFC3339)
		default:
			continue
		}
		r, err := m.release(ctx, actor, rec, why)
		var re *RecordError
		if errors.As(err, &re) {
			skipped = append(skipped, err)
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, errors.Join(skipped...)
}

// Forget records task's worktree released without touching the
// repository: for a record that git does not confirm (Release and GC
// refuse it with a *RecordError), once an operator has looked. The same
// actors may forget a record as may release it.
func (m *Manager) Forget(ctx context.Context, actor, task string) (Worktree, error) {
	rec, err := m.releasable(ctx, actor, task)
	if err != nil || rec.Status == StatusReleased {
		return rec, err
	}
	rec.Status = StatusReleased
	return put(ctx, m.ws, actor, rec, "forgotten: the repository was left as it is")
}

// StartClaimed is Start (StartPerAgent with perAgent) for a task actor
// has just claimed: if the worktree cannot be made, it gives the claim
// back at once (Tasks.Release), so the task is not held by an agent with
// nowhere to work on it, and the error says so. Every face's "claim with
// a worktree" is this.
func (m *Manager) StartClaimed(ctx context.Context, actor, task string, perAgent bool) (Worktree, error) {
	start := m.Start
	if perAgent {
		start = m.StartPerAgent
	}
	w, err := start(ctx, actor, task)
	if err == nil {
		return w, nil
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	if _, rerr := m.ws.Tasks().Release(context.WithoutCancel(ctx), workspace.Write{Actor: actor, Message: "no worktree: " + first}, task); rerr != nil {
		return w, fmt.Errorf("%w (and giving the claim back failed: %v)", err, rerr)
	}
	return w, fmt.Errorf("task %s claimed, then given back: %w", task, err)
}

// started returns task's worktree record, and whether the task already has
// a worktree (so Start returns that record, or the error): one recorded and
// not released, whose directory must still be there. A task with none, or
// only a released one, gets its record (for its version) and false.
func (m *Manager) started(ctx context.Context, task string) (Worktree, bool, error) {
	rec, err := get(ctx, m.ws, task)
	switch {
	case err == nil && rec.Status != StatusReleased:
		if _, serr := os.Stat(rec.Path); serr != nil {
			return rec, true, fmt.Errorf("task %s: its worktree %s is recorded as %s but is missing: release it first: %w", task, rec.Path, rec.Status, workspace.ErrConflict)
		}
		return rec, true, nil
	case err != nil && !isNotFound(err):
		return rec, true, err
	}
	return rec, false, nil
}
