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
