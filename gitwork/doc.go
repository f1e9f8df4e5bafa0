// Package gitwork gives each task of a workspace its own git worktree and
// merges the results back through a sequential merge queue that validates
// before it merges.
//
// It drives the git command (2.38 or newer, checked by New): go-git has no
// worktrees, rebase or three-way merge. Every value from a user that
// reaches git (task ids, branch names, paths) is validated first and
// placed after --end-of-options or --, so it is never read as an option.
//
// A Manager makes worktrees (Start), queues them (Submit), and removes them
// (Release, GC), keeping unmerged work under refs/agentspace/backup/ first.
// Each worktree is recorded in the workspace as a note of kind NoteKind
// keyed by its task id, whose JSON body is a Worktree; its note.put events
// are the worktree's history.
//
// A Merger takes the queue's lease (a workspace lock with a fencing token),
// writes its token to the fence ref refs/agentspace/merge-fence/<branch>,
// and then, in submission order, builds each entry on the integration
// branch (rebase or merge commit; conflicts pre-checked with git merge-tree
// --write-tree), runs the validation commands in a clean temporary
// checkout, and advances the branch in one git ref transaction that
// verifies the fence ref and compares the branch with the commit the
// candidate was built on. So the branch is at its old commit or at a fully
// validated new one whatever happens to the merger, and a merger whose
// lease was taken over cannot move it.
package gitwork
