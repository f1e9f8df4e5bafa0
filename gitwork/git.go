package gitwork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// MinGitVersion is the oldest git this package drives: 2.38 brought
// `git merge-tree --write-tree`, which pre-checks a merge without a checkout.
var MinGitVersion = [3]int{2, 38, 0}

// git runs the git command in one repository. Every argument that comes
// from a user (a branch, a path, a commit) is validated before it gets
// here, and is placed after --end-of-options or -- where git accepts them,
// so it can never be read as an option.
type git struct {
	dir string // the directory git runs in: the repository or a worktree
	env []string
}

// gitError is a failed git command: its arguments, exit code and stderr.
type gitError struct {
	args   []string
	code   int
	stderr string
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.args, " "), e.code, msg)
}

// run runs git with args and returns its stdout.
func (g git) run(ctx context.Context, args ...string) (string, error) {
	return g.runIn(ctx, nil, args...)
}

// runIn is run with stdin.
func (g git) runIn(ctx context.Context, stdin []byte, args ...string) (string, error) {
	if mutatesWorktrees(args) {
		unlock, err := g.lockWorktrees(ctx)
		if err != nil {
			return "", fmt.Errorf("gitwork: the worktree lock: %w", err)
		}
		defer unlock()
	}
	cmd := exec.CommandContext(ctx, "git", args...) // #nosec G204 -- fixed program; user values are validated and placed after --end-of-options or --
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Env = append(cmd.Env, g.env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), &gitError{args: args, code: ee.ExitCode(), stderr: errb.String()}
		}
		return out.String(), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// exitCode returns the exit code of a git error, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// revParse resolves a ref (validated) to a full commit id.
func (g git) revParse(ctx context.Context, ref string) (string, error) {
	out, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s is not a commit: %w", ref, workspace.ErrNotFound)
	}
	return strings.TrimSpace(out), nil
}

// isAncestor reports whether commit a is an ancestor of (or equal to) b.
func (g git) isAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := g.run(ctx, "merge-base", "--is-ancestor", "--end-of-options", a, b)
	switch exitCode(err) {
	case -1:
		if err != nil {
			return false, err
		}
		return true, nil
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, err
}

var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`git version (\d+)\.(\d+)(?:\.(\d+))?`) })

// CheckGitVersion returns the git version found on PATH, or an error if
// there is none or it is older than MinGitVersion.
func CheckGitVersion(ctx context.Context) (string, error) {
	out, err := git{}.run(ctx, "version")
	if err != nil {
		return "", fmt.Errorf("gitwork: cannot run git: %w", err)
	}
	m := versionRE().FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("gitwork: cannot read git's version from %q", strings.TrimSpace(out))
	}
	var v [3]int
	for i := range 3 {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	for i := range 3 {
		if v[i] != MinGitVersion[i] {
			if v[i] < MinGitVersion[i] {
				return "", fmt.Errorf("gitwork: git %d.%d.%d is too old: %d.%d.%d or newer is needed (for merge-tree --write-tree)",
					v[0], v[1], v[2], MinGitVersion[0], MinGitVersion[1], MinGitVersion[2])
			}
			break
		}
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
}

// invalid is a workspace.ErrInvalid naming the field.
func invalid(field, format string, args ...any) error {
	return &workspace.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

var hexRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) })

// checkCommit accepts a full hex object id only.
func checkCommit(field, c string) error {
	if !hexRE().MatchString(c) {
		return invalid(field, "%q is not a full commit id", c)
	}
	return nil
}

// CheckBranch validates a branch name before it reaches git: the rules of
// git check-ref-format, and no leading '-', so it can never be an option.
func CheckBranch(name string) error {
	switch {
	case name == "":
		return invalid("branch", "empty")
	case len(name) > 200:
		return invalid("branch", "longer than 200 bytes")
	case strings.HasPrefix(name, "-"), strings.HasPrefix(name, "/"), strings.HasSuffix(name, "/"),
		strings.HasSuffix(name, "."), strings.HasSuffix(name, ".lock"):
		return invalid("branch", "%q: may not start with '-' or '/' nor end with '/', '.' or '.lock'", name)
	case strings.Contains(name, ".."), strings.Contains(name, "//"), strings.Contains(name, "@{"), name == "@":
		return invalid("branch", "%q: may not contain '..', '//' or '@{'", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, ".") || strings.HasPrefix(seg, "-") {
			return invalid("branch", "%q: a component may not start with '.' or '-'", name)
		}
	}
	for _, r := range name {
		if r < 0x21 || r == 0x7f || strings.ContainsRune(`~^:?*[\`, r) {
			return invalid("branch", "%q: may not contain spaces, control characters or any of ~^:?*[\\", name)
		}
	}
	return nil
}

// transient reports a failure that a concurrent `git worktree add` or
// `git worktree prune` outside this package causes: git reads every
// worktree's files and one being made lacks some yet, or a prune removed
// the administrative directory of the worktree being made.
func transient(err error) bool {
	var ge *gitError
	if !errors.As(err, &ge) || !strings.Contains(ge.stderr, "worktrees/") {
		return false
	}
	return strings.Contains(ge.stderr, "failed to read") || strings.Contains(ge.stderr, "could not create directory") ||
		strings.Contains(ge.stderr, "could not open") || strings.Contains(ge.stderr, "not a git repository")
}

// runWorktrees is run for a command that reads every worktree's files,
// tried again (up to five times) while another process is making one.
func (g git) runWorktrees(ctx context.Context, args ...string) (string, error) {
	for try := 1; ; try++ {
		out, err := g.run(ctx, args...)
		if !transient(err) || try == 5 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
}

// addWorktree adds a worktree at path on a new branch from start, tried
// again while another process is making a worktree; a try that made the
// branch before it failed is finished on that branch.
func (g git) addWorktree(ctx context.Context, path, branch, start string) error {
	for try := 1; ; try++ {
		_, err := g.run(ctx, "worktree", "add", "--quiet", "-b", branch, "--", path, start)
		if !transient(err) || try == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
		if at, rerr := g.revParse(ctx, "refs/heads/"+branch); rerr == nil && at == start {
			_, err := g.runWorktrees(ctx, "worktree", "add", "--quiet", "--", path, branch)
			return err
		}
	}
}
