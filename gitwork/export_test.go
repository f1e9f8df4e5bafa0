package gitwork

import (
	"context"

	"github.com/agentspace/agentspace/workspace"
)

// Plant writes w as task w.Task's worktree record through the package's
// own writer, as anyone with note rights could write it before worktree
// records were reserved: the tests' hostile records.
func Plant(ctx context.Context, ws *workspace.Workspace, actor string, w Worktree) (Worktree, error) {
	if cur, err := get(ctx, ws, w.Task); err == nil {
		w.Version = cur.Version
	}
	return put(ctx, ws, actor, w, "planted")
}

// AddWorktree is the package's own `git worktree add -b` with its retries.
func AddWorktree(ctx context.Context, repo, path, branch, start string) error {
	return git{dir: repo}.addWorktree(ctx, path, branch, start)
}

// PruneWorktrees is the package's own `git worktree prune`.
func PruneWorktrees(ctx context.Context, repo string) error {
	_, err := git{dir: repo}.run(ctx, "worktree", "prune")
	return err
}

// RemoveWorktree is the package's own `git worktree remove --force`.
func RemoveWorktree(ctx context.Context, repo, path string) error {
	_, err := git{dir: repo}.run(ctx, "worktree", "remove", "--force", "--", path)
	return err
}
