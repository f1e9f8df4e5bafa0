package gitwork

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Merge modes: how a submitted branch is brought up to date with the
// integration branch.
const (
	ModeRebase = "rebase" // replay the branch's commits on the integration head: linear history
	ModeMerge  = "merge"  // a merge commit of the integration head and the branch
)

// What happens to a task whose submission conflicts or fails validation.
const (
	OnConflictReturn = "return" // the task stays with its agent, the record names the files or output
	OnConflictTask   = "task"   // also a new task to resolve it, whose areas are the conflicting files
)

// Config is how worktrees are made and merged. Zero fields take the
// defaults documented on each.
type Config struct {
	// Repo is the repository: its top directory, or any worktree of it.
	Repo string
	// Root is where worktrees are made, default .agentspace/worktrees. A
	// relative root is taken from the repository's main working tree (its
	// top, or the bare repository's directory), wherever Repo points, so
	// every worktree of the repository agrees on it.
	Root string
	// Integration is the branch merged into, default "main".
	Integration string
	// BranchPrefix names task branches, default "agent/": agent/<short id>.
	BranchPrefix string
	// Mode is ModeRebase (default) or ModeMerge.
	Mode string
	// Validate are shell commands (sh -c) run in a clean checkout of the
	// merge result; every one must exit 0 for it to land.
	Validate []string
	// ValidateTimeout bounds each validation command, default 10m.
	ValidateTimeout time.Duration
	// OnConflict is OnConflictReturn (default) or OnConflictTask.
	OnConflict string
	// QueueLease is how long a submitted task's claim is extended for while
	// it waits in the queue, default 2h.
	QueueLease time.Duration
	// LeaderTTL is the merger's lease on the queue, default 30s; it is
	// renewed at a third of that.
	LeaderTTL time.Duration
	// GCAge is how long a task's claim must have lapsed (or the task have
	// ended) before gc releases its worktree, default 1h.
	GCAge time.Duration
	// MaxRetries bounds how often one entry is rebuilt because the
	// integration branch moved under it, default 5.
	MaxRetries int
	// PerAgent makes Start give each agent one long-lived worktree and
	// branch (BranchPrefix + the agent's name), reused across its tasks,
	// instead of one per task: see StartPerAgent.
	PerAgent bool
	// FollowPoll is how often a following merger looks at the queue when
	// no submission's event woke it: a safety net, default 10s.
	FollowPoll time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Repo == "" {
		return c, invalid("repo", "must name the repository")
	}
	abs, err := filepath.Abs(c.Repo)
	if err != nil {
		return c, fmt.Errorf("gitwork: repo: %w", err)
	}
	c.Repo = abs
	if c.Integration == "" {
		c.Integration = "main"
	}
	if c.BranchPrefix == "" {
		c.BranchPrefix = "agent/"
	}
	if c.Mode == "" {
		c.Mode = ModeRebase
	}
	if c.OnConflict == "" {
		c.OnConflict = OnConflictReturn
	}
	if c.ValidateTimeout <= 0 {
		c.ValidateTimeout = 10 * time.Minute
	}
	if c.QueueLease <= 0 {
		c.QueueLease = 2 * time.Hour
	}
	if c.LeaderTTL <= 0 {
		c.LeaderTTL = 30 * time.Second
	}
	if c.GCAge <= 0 {
		c.GCAge = time.Hour
	}
	if c.FollowPoll <= 0 {
		c.FollowPoll = 10 * time.Second
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 5
	}
	if err := CheckBranch(c.Integration); err != nil {
		return c, fmt.Errorf("integration branch: %w", err)
	}
	if err := CheckBranch(c.BranchPrefix + "x"); err != nil {
		return c, fmt.Errorf("branch prefix: %w", err)
	}
	switch c.Mode {
	case ModeRebase, ModeMerge:
	default:
		return c, invalid("mode", "%q: want %q or %q", c.Mode, ModeRebase, ModeMerge)
	}
	switch c.OnConflict {
	case OnConflictReturn, OnConflictTask:
	default:
		return c, invalid("on_conflict", "%q: want %q or %q", c.OnConflict, OnConflictReturn, OnConflictTask)
	}
	if c.Root == "" {
		c.Root = filepath.Join(".agentspace", "worktrees")
	}
	if filepath.IsAbs(c.Root) {
		c.Root = filepath.Clean(c.Root)
	}
	if err := checkPath("root", c.Root); err != nil {
		return c, err
	}
	return c, nil
}

// rootUnder makes a relative root absolute under top, the repository's
// main working tree.
func (c Config) rootUnder(top string) (Config, error) {
	if !filepath.IsAbs(c.Root) {
		c.Root = filepath.Join(top, c.Root)
	}
	return c, checkPath("root", c.Root)
}

// checkPath refuses paths git or a shell script could misread: control
// characters (newlines) anywhere. Paths are absolute, so never start with '-'.
func checkPath(field, p string) error {
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return invalid(field, "%q contains a control character", p)
		}
	}
	if strings.Contains(p, "\\") {
		return invalid(field, "%q contains a backslash", p)
	}
	return nil
}
