package gitwork

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace"
)

// Per-agent mode (the multiagent-loop workflow): each agent has one
// worktree and branch, BranchPrefix + its name, that outlive its tasks.
// Start brings the branch up to date with the integration branch; Submit
// queues the commits since the last point the integration branch holds;
// after a merge the merger moves the branch to the merged commit if the
// branch holds nothing newer than the submission, and leaves it alone
// otherwise. One task at a time works in an agent's worktree.

var (
	slugRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`) })
	shortIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{12}$`) })
)

// agentSlug names an agent's branch and directory: the actor itself when
// it is a plain name, else the actor with other characters replaced, then
// "+" and a hash of the whole name. A name that looks like a task's short
// id gets the hash too. The slugs are one per actor: a plain name has no
// "+" (slugRE), so no actor's own name is another's hashed slug, and two
// hashed slugs differ where their actors' hashes do.
func agentSlug(actor string) (string, error) {
	if actor == "" {
		return "", invalid("actor", "empty: per-agent worktrees are named after their agent")
	}
	if slugRE().MatchString(actor) && len(actor) <= 64 && !shortIDRE().MatchString(actor) &&
		!strings.HasSuffix(actor, ".lock") && !strings.HasSuffix(actor, ".") && !strings.Contains(actor, "..") {
		return actor, nil
	}
	var b strings.Builder
	for _, r := range actor {
		if b.Len() >= 40 {
			break
		}
		if r < 0x80 && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(actor))
	return strings.TrimLeft(b.String(), "-") + "+" + hex.EncodeToString(sum[:8]), nil
}

// AgentWorktree returns the path and branch of actor's per-agent worktree.
func (m *Manager) AgentWorktree(actor string) (path, branch string, err error) {
	slug, err := agentSlug(actor)
	if err != nil {
		return "", "", err
	}
	branch = m.cfg.BranchPrefix + slug
	if err := CheckBranch(branch); err != nil {
		return "", "", err
	}
	return filepath.Join(m.cfg.Root, "agent-"+slug), branch, nil
}

// occupied means a per-agent worktree holds another task's work.
func occupied(st Status) bool {
	switch st {
	case StatusActive, StatusSubmitted, StatusMerging, StatusMerged, StatusConflicted, StatusFailed:
		return true
	}
	return false
}

// StartPerAgent records actor's long-lived worktree as task's, making it
// (and the branch) the first time. The worktree must be clean and hold no
// other task of the agent that is not yet merged or released
// (ErrConflict, naming it). The branch is then brought up to date with the
// integration branch: fast-forwarded when it has nothing of its own,
// rebased when it has (its old head is kept first at
// refs/agentspace/backup/agent-<name>); a rebase that stops is aborted and
// refused with ErrConflict. The record's base is where the branch leaves
// the integration branch. Started again for the same task, it returns the
// record.
func (m *Manager) StartPerAgent(ctx context.Context, actor, task string) (Worktree, error) {
	if err := checkTask(task); err != nil {
		return Worktree{}, err
	}
	if _, err := m.claimedBy(ctx, actor, task); err != nil {
		return Worktree{}, err
	}
	path, branch, err := m.AgentWorktree(actor)
	if err != nil {
		return Worktree{}, err
	}
	if err := checkPath("path", path); err != nil {
		return Worktree{}, err
	}
	rec, started, err := m.started(ctx, task)
	if started || err != nil {
		return rec, err
	}
	recs, err := List(ctx, m.ws)
	if err != nil {
		return rec, err
	}
	for _, r := range recs {
		if r.PerAgent && r.Branch == branch && r.Task != task && occupied(r.Status) {
			return rec, fmt.Errorf("the worktree %s of %s holds task %s (%s): submit it and let it merge, or release it, before starting another: %w",
				path, actor, r.Task, r.Status, workspace.ErrConflict)
		}
	}
	if err := m.agentCheckout(ctx, path, branch); err != nil {
		return rec, err
	}
	changes, err := dirty(ctx, path)
	if err != nil {
		return rec, err
	}
	if changes != "" {
		return rec, fmt.Errorf("%w in %s: commit or remove them before starting task %s:\n%s", ErrDirty, path, task, changes)
	}
	if err := m.catchUp(ctx, actor, path, branch); err != nil {
		return rec, err
	}
	base, err := m.mergeBase(ctx, branch)
	if err != nil {
		return rec, err
	}
	w := Worktree{Task: task, Agent: actor, Path: path, Branch: branch, Base: base, Status: StatusActive, PerAgent: true, Version: rec.Version}
	return put(ctx, m.ws, actor, w, "per-agent worktree "+path+" taken up at "+short(base))
}

// agentCheckout makes sure the worktree at path exists with branch
// checked out: made from the integration head, or on the branch a former
// worktree left.
func (m *Manager) agentCheckout(ctx context.Context, path, branch string) error {
	if _, err := os.Stat(path); err == nil {
		cur, err := git{dir: path}.run(ctx, "symbolic-ref", "--quiet", "HEAD")
		if err != nil || strings.TrimSpace(cur) != "refs/heads/"+branch {
			return fmt.Errorf("gitwork: %s is not a worktree on %s (HEAD %q): move it away: %w", path, branch, strings.TrimSpace(cur), workspace.ErrConflict)
		}
		return nil
	}
	if err := os.MkdirAll(m.cfg.Root, 0o750); err != nil {
		return fmt.Errorf("gitwork: %w", err)
	}
	// A directory removed by hand leaves its registration: forget it.
	if _, err := m.git.run(ctx, "worktree", "prune"); err != nil {
		return err
	}
	if _, err := m.git.revParse(ctx, "refs/heads/"+branch); err == nil {
		_, err := m.git.runWorktrees(ctx, "worktree", "add", "--quiet", "--", path, branch)
		return err
	}
	integ, err := m.git.revParse(ctx, "refs/heads/"+m.cfg.Integration)
	if err != nil {
		return err
	}
	return m.git.addWorktree(ctx, path, branch, integ)
}

// catchUp brings a clean agent worktree up to date with the integration
// branch.
func (m *Manager) catchUp(ctx context.Context, actor, path, branch string) error {
	integ, err := m.git.revParse(ctx, "refs/heads/"+m.cfg.Integration)
	if err != nil {
		return err
	}
	head, err := m.git.revParse(ctx, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if in, err := m.git.isAncestor(ctx, integ, head); err != nil || in {
		return err // it holds the integration head already
	}
	wg := git{dir: path}
	if ff, err := m.git.isAncestor(ctx, head, integ); err != nil {
		return err
	} else if ff {
		_, err := wg.run(ctx, "merge", "--quiet", "--ff-only", "--end-of-options", integ)
		return err
	}
	slug, _ := agentSlug(actor)
	ref := "refs/agentspace/backup/agent-" + slug
	if _, err := m.git.run(ctx, "update-ref", "-m", "agentspace: before rebasing "+branch, "--end-of-options", ref, head); err != nil {
		return err
	}
	if _, err := wg.run(ctx, "rebase", "--quiet", "--no-autosquash", "--end-of-options", integ); err != nil {
		_, _ = wg.run(context.WithoutCancel(ctx), "rebase", "--abort")
		return fmt.Errorf("%s does not rebase cleanly onto %s (its old head is kept at %s): rebase it by hand in %s, then start again: %w\n%v",
			branch, m.cfg.Integration, ref, path, workspace.ErrConflict, err)
	}
	return nil
}

// mergeBase is the last commit of the integration branch that branch holds.
func (m *Manager) mergeBase(ctx context.Context, branch string) (string, error) {
	out, err := m.git.run(ctx, "merge-base", "--end-of-options", "refs/heads/"+branch, "refs/heads/"+m.cfg.Integration)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// settleAgent moves a per-agent branch to the commit that merged its
// submission, when the branch still ends at the submitted head and its
// worktree is clean: a ref compare-and-swap, then a two-tree read-tree
// that updates the checkout (undone if it fails). Otherwise the branch
// holds work beyond the submission and is left for the next Start to
// rebase. It acts on p, the record's worktree as confirm checked it. It
// returns what it did, for the record.
func (m *Manager) settleAgent(ctx context.Context, rec Worktree, p place) string {
	ref := p.ref
	head, err := m.git.revParse(ctx, ref)
	if err != nil {
		return "agent branch gone"
	}
	if !p.exists {
		return fmt.Sprintf("%s kept at %s: its worktree %s is gone", p.branch, short(head), p.path)
	}
	if head == rec.Merged {
		// A fast-forward; or a merger died between moving the branch and
		// its checkout, whose index is still the submitted head's.
		wg := git{dir: p.path}
		if rec.Head != rec.Merged && checkCommit("head", rec.Head) == nil {
			if _, err := wg.run(ctx, "diff-index", "--quiet", "--cached", rec.Head, "--"); err == nil {
				if _, err := wg.run(ctx, "read-tree", "-m", "-u", rec.Head, rec.Merged); err != nil {
					return fmt.Sprintf("%s is at %s but its checkout could not be updated: %v", p.branch, short(head), err)
				}
			}
		}
		return ""
	}
	if head != rec.Head {
		return fmt.Sprintf("%s kept at %s: it has commits after the submission; the next start rebases them", p.branch, short(head))
	}
	if changes, err := dirty(ctx, p.path); err != nil || changes != "" {
		return fmt.Sprintf("%s kept at %s: its worktree has uncommitted changes", p.branch, short(head))
	}
	if err := checkCommit("merged", rec.Merged); err != nil {
		return err.Error()
	}
	if _, err := m.git.run(ctx, "update-ref", "-m", "agentspace: merged as "+short(rec.Merged), "--end-of-options", ref, rec.Merged, head); err != nil {
		return fmt.Sprintf("%s kept: it moved while being reset", p.branch)
	}
	if _, err := (git{dir: p.path}).run(ctx, "read-tree", "-m", "-u", head, rec.Merged); err != nil {
		_, _ = m.git.run(context.WithoutCancel(ctx), "update-ref", "-m", "agentspace: reset undone", "--end-of-options", ref, head, rec.Merged)
		return fmt.Sprintf("%s kept at %s: its checkout could not be updated: %v", p.branch, short(head), err)
	}
	return fmt.Sprintf("%s reset to %s", p.branch, short(rec.Merged))
}
