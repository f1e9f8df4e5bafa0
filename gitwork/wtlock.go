package gitwork

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Worktree administration is not safe between processes: `git worktree
// prune` deletes a worktrees/NAME directory another process's `git
// worktree add` has just made and not yet filled (and the worktrees
// directory itself when it looks empty), and that add fails with "could
// not create directory" or "could not open .../gitdir". Every agent and
// every merger runs both, so this package takes an exclusive file lock in
// the repository's common git directory around each command that changes
// the worktree list. A git run by hand still can race; the retries in
// runWorktrees and addWorktree cover that case.

// mutatesWorktrees reports whether args change the repository's list of
// worktrees.
func mutatesWorktrees(args []string) bool {
	if len(args) < 2 || args[0] != "worktree" {
		return false
	}
	switch args[1] {
	case "add", "prune", "remove", "move", "repair":
		return true
	}
	return false
}

// commonDirs caches each directory's common git directory; it never
// changes for a directory that stays a repository or worktree.
var commonDirs sync.Map // dir -> absolute common git dir

// commonDir is the common git directory of the repository g runs in.
func (g git) commonDir(ctx context.Context) (string, error) {
	if d, ok := commonDirs.Load(g.dir); ok {
		return d.(string), nil
	}
	out, err := g.runIn(ctx, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	d := strings.TrimSpace(out)
	commonDirs.Store(g.dir, d)
	return d, nil
}

// lockWorktrees takes the repository's worktree lock, waiting for as long
// as ctx allows, and returns its release.
func (g git) lockWorktrees(ctx context.Context) (func(), error) {
	dir, err := g.commonDir(ctx)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "agentspace-worktrees.lock"), os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- a fixed name inside the repository's own git directory
	if err != nil {
		return nil, err
	}
	if err := lockFile(ctx, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil // closing the descriptor drops the lock
}
