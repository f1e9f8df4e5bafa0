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

// whyLimit bounds Why: enough of a failing command's output to see why.
const whyLimit = 2 << 10

// Why is what the merge queue said of an entry it gave back, as the
// task's result and 'wsctl work' quote it: the whole detail when it is
// short; else its first line (for a failed validation, the command) and
// the end of the rest (where a failing command's output says why), about
// 2 KiB in all, cut at a line.
func (w Worktree) Why() string {
	d := strings.TrimSpace(w.Detail)
	if len(d) <= whyLimit {
		return d
	}
	head, rest, _ := strings.Cut(d, "\n")
	if len(head) > 200 {
		head = strings.ToValidUTF8(head[:200], "") + "…"
	}
	if n := whyLimit - len(head); len(rest) > n {
		rest = rest[len(rest)-n:]
		if i := strings.IndexByte(rest, '\n'); i >= 0 && i < len(rest)-1 {
			rest = rest[i+1:]
		}
		rest = "…\n" + strings.ToValidUTF8(rest, "")
	}
	return head + "\n" + rest
}
