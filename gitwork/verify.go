package gitwork

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// A worktree record is a note: anyone with note rights can write one, so
// the code that acts on it re-checks it against git first. It acts only on
// the names the machinery itself gives a task (its branch under
// BranchPrefix, its directory under Root, derived from the task id or, per
// agent, from the agent's name), and only once git confirms them: the
// directory is a worktree registered with git on that branch, the commits
// the record names lie where it says. The integration branch and every
// branch outside the namespace are never deleted or moved but by the
// merge itself.

// ErrRecordMismatch is wrapped by every RecordError: a worktree record
// names a branch, path or commit that git does not confirm.
var ErrRecordMismatch = errors.New("worktree record does not match the repository")

// RecordError is a worktree record that failed its re-check against git:
// nothing was done to the repository on its account. It matches
// ErrRecordMismatch and workspace.ErrConflict.
type RecordError struct {
	Task   string // the record's key
	Field  string // the field that did not check out: branch, path, head, base, merged
	Value  string // what the record says
	Reason string // why that is refused
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("worktree record of task %s: %s %q %s: left alone", e.Task, e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is match ErrRecordMismatch and workspace.ErrConflict.
func (e *RecordError) Unwrap() []error { return []error{ErrRecordMismatch, workspace.ErrConflict} }

// place is a record's worktree as the machinery names it, confirmed
// against git: the only names release, gc and the merger act on.
type place struct {
	path   string // <Root>/<short id> or <Root>/agent-<name>
	branch string // BranchPrefix + <short id> or + <name>
	ref    string // refs/heads/<branch>
	head   string // the branch's commit; "" when the branch is gone
	exists bool   // the directory is there, a worktree registered with git on branch
}

// confirm re-checks rec against the repository and returns the names it
// may act on, or a *RecordError.
func (m *Manager) confirm(ctx context.Context, rec Worktree) (place, error) {
	bad := func(field, value, format string, args ...any) (place, error) {
		return place{}, &RecordError{Task: rec.Task, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	if checkTask(rec.Task) != nil {
		return bad("task", rec.Task, "is not a task id")
	}
	var p place
	if rec.PerAgent {
		path, branch, err := m.AgentWorktree(rec.Agent)
		if err != nil {
			return bad("agent", rec.Agent, "names no agent worktree: %v", err)
		}
		p.path, p.branch = path, branch
	} else {
		short := shortID(rec.Task)
		p.path, p.branch = filepath.Join(m.cfg.Root, short), m.cfg.BranchPrefix+short
	}
	if rec.Branch != p.branch {
		return bad("branch", rec.Branch, "is not the branch this repository's worktrees give the task (%s)", p.branch)
	}
	if p.branch == m.cfg.Integration || !strings.HasPrefix(p.branch, m.cfg.BranchPrefix) || CheckBranch(p.branch) != nil {
		return bad("branch", rec.Branch, "is outside the worktrees' namespace %s", m.cfg.BranchPrefix)
	}
	if rec.Path != p.path {
		return bad("path", rec.Path, "is not the directory this repository's worktrees give the task (%s)", p.path)
	}
	p.ref = "refs/heads/" + p.branch
	if h, err := m.git.revParse(ctx, p.ref); err == nil {
		p.head = h
	}
	fi, err := os.Lstat(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil // removed by hand: nothing there to act on
	case err != nil:
		return p, fmt.Errorf("gitwork: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir():
		return bad("path", rec.Path, "is not a directory (a symbolic link or a file)")
	}
	wts, err := m.worktrees(ctx)
	if err != nil {
		return p, err
	}
	real, err := filepath.EvalSymlinks(p.path)
	if err != nil {
		return p, fmt.Errorf("gitwork: %w", err)
	}
	for _, wt := range wts {
		if wt.path != p.path && wt.path != real {
			continue
		}
		if wt.branch != p.ref {
			return bad("path", rec.Path, "is a worktree on %s, not on %s", orDetached(wt.branch), p.ref)
		}
		p.exists = true
		return p, nil
	}
	return bad("path", rec.Path, "is not a worktree registered with git")
}

// confirmCommits also checks the commits a queued record names: head lies
// on the task's branch (while the branch is there) and is a commit. A
// merged record's branch may instead hold its merged commit (a per-agent
// branch moved there after the merge).
func (m *Manager) confirmCommits(ctx context.Context, rec Worktree, p place) error {
	bad := func(field, value, format string, args ...any) error {
		return &RecordError{Task: rec.Task, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	if checkCommit("head", rec.Head) != nil {
		return bad("head", rec.Head, "is not a full commit id")
	}
	if _, err := m.git.revParse(ctx, rec.Head); err != nil {
		return bad("head", rec.Head, "is not a commit of this repository")
	}
	if p.head == "" {
		return nil
	}
	if on, err := m.git.isAncestor(ctx, rec.Head, p.head); err != nil || on {
		return err
	}
	if rec.Status == StatusMerged && checkCommit("merged", rec.Merged) == nil {
		if on, err := m.git.isAncestor(ctx, rec.Merged, p.head); err != nil || on {
			return err
		}
	}
	return bad("head", rec.Head, "is not on %s (at %s)", p.branch, short(p.head))
}

// confirmMerged checks a merged record: the integration branch holds its
// merged commit, and that commit holds every commit of the entry (by
// patch, so a rebased entry counts).
func (m *Manager) confirmMerged(ctx context.Context, rec Worktree) error {
	bad := func(field, value, format string, args ...any) error {
		return &RecordError{Task: rec.Task, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	if checkCommit("merged", rec.Merged) != nil {
		return bad("merged", rec.Merged, "is not a full commit id")
	}
	if in, err := m.git.isAncestor(ctx, rec.Merged, "refs/heads/"+m.cfg.Integration); err != nil || !in {
		return bad("merged", rec.Merged, "is not on %s", m.cfg.Integration)
	}
	out, err := m.git.run(ctx, "cherry", "--end-of-options", rec.Merged, rec.Head)
	if err != nil {
		return bad("head", rec.Head, "cannot be compared with the merged commit: %v", err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "+") {
			return bad("merged", rec.Merged, "lacks commit %s of the entry", short(strings.TrimSpace(l[1:])))
		}
	}
	return nil
}

// worktreeEntry is one worktree git knows.
type worktreeEntry struct {
	path   string
	branch string // refs/heads/…, "" when detached
	bare   bool
}

// worktrees lists the worktrees registered with the repository.
func (m *Manager) worktrees(ctx context.Context) ([]worktreeEntry, error) {
	out, err := m.git.runWorktrees(ctx, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var list []worktreeEntry
	for _, field := range strings.Split(out, "\x00") {
		switch {
		case strings.HasPrefix(field, "worktree "):
			list = append(list, worktreeEntry{path: strings.TrimPrefix(field, "worktree ")})
		case len(list) == 0:
		case strings.HasPrefix(field, "branch "):
			list[len(list)-1].branch = strings.TrimPrefix(field, "branch ")
		case field == "bare":
			list[len(list)-1].bare = true
		}
	}
	return list, nil
}

func orDetached(ref string) string {
	if ref == "" {
		return "a detached HEAD"
	}
	return ref
}
