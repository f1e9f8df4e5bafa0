package gitwork

import (
	"fmt"
	"strings"
)

// Next says what the record's agent does next, in one sentence naming the
// commands; integration is the branch the queue merges into. It is what
// a conflicted or failed entry's task result says, and what 'wsctl work'
// shows its agent.
func (w Worktree) Next(integration string) string {
	submit := fmt.Sprintf("'wsctl work submit %s'", w.Task)
	switch w.Status {
	case StatusActive:
		return fmt.Sprintf("work in %s, commit, then run %s", w.Path, submit)
	case StatusSubmitted, StatusMerging:
		if strings.HasPrefix(w.Detail, "waiting: ") {
			return "wait: the queue is held up (" + firstLine(w.Detail) + ")"
		}
		return "wait: the merge queue has it"
	case StatusMerged:
		return "nothing: it is merged"
	case StatusConflicted:
		files, ok := strings.CutPrefix(firstLine(w.Detail), "conflicting files: ")
		if !ok {
			files = "the conflicts"
		}
		return fmt.Sprintf("in %s, run 'git rebase %s', resolve %s, commit, then run %s (or 'wsctl work release %s' to drop it)",
			w.Path, integration, files, submit, w.Task)
	case StatusFailed:
		return fmt.Sprintf("read what failed ('wsctl work' shows it), fix it in %s, commit, then run %s (or 'wsctl work release %s' to drop it)",
			w.Path, submit, w.Task)
	}
	return "nothing: it is released"
}
