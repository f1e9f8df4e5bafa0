package gitwork

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// A worktree with the integration branch checked out (the repository's
// main checkout, usually) is updated with the branch, as `git merge
// --ff-only` would update it: a two-tree `git read-tree -m -u old new`,
// tried first with --dry-run so that a checkout whose uncommitted or
// untracked files the merge would overwrite stops the merge before the
// branch moves. The branch is then never left moved under a checkout
// that still shows the old commit.

// CheckoutError is a merge the queue did not land because the integration
// branch is checked out in a worktree whose uncommitted or untracked
// changes it would overwrite. The branch was not moved; the entry waits in
// the queue. It matches workspace.ErrConflict.
type CheckoutError struct {
	Branch string // the integration branch
	Path   string // the worktree it is checked out in
	Reason string // git's words
}

func (e *CheckoutError) Error() string {
	return fmt.Sprintf("%s is checked out in %s, whose changes the merge would overwrite (%s): %s was not moved, and the entry waits in the queue; commit or stash them there (git -C %s stash), then run the queue again",
		e.Branch, e.Path, e.Reason, e.Branch, e.Path)
}

// Unwrap makes errors.Is match workspace.ErrConflict.
func (e *CheckoutError) Unwrap() error { return workspace.ErrConflict }

// integrationCheckouts lists the worktrees that have the integration
// branch checked out.
func (m *Manager) integrationCheckouts(ctx context.Context) ([]string, error) {
	wts, err := m.worktrees(ctx)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, wt := range wts {
		if !wt.bare && wt.branch == "refs/heads/"+m.cfg.Integration {
			dirs = append(dirs, wt.path)
		}
	}
	return dirs, nil
}

// checkoutFollows updates (or, with dryRun, checks that it could update)
// the checkout in dir from old to next, refusing to overwrite local changes.
func (m *Manager) checkoutFollows(ctx context.Context, dir, old, next string, dryRun bool) error {
	wg := git{dir: dir}
	// Stat information only: files touched but unchanged are not changes.
	_, _ = wg.run(ctx, "update-index", "-q", "--refresh")
	args := []string{"read-tree", "-m", "-u"}
	if dryRun {
		args = append(args, "--dry-run")
	}
	if _, err := wg.run(ctx, append(args, old, next)...); err != nil {
		reason := err.Error()
		if ge, ok := err.(*gitError); ok {
			reason = strings.Join(strings.Fields(ge.stderr), " ")
		}
		return &CheckoutError{Branch: m.cfg.Integration, Path: dir, Reason: reason}
	}
	return nil
}
