package shadow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// The rules a validation checks, named in each Violation.
const (
	RuleArea    = "area"    // the path is outside the task's declared areas
	RuleRole    = "role"    // the actor's roles may not write (or delete) the path under the policy
	RuleLease   = "lease"   // someone else holds a lease on the path or a prefix of it
	RuleCommand = "command" // a validator command failed or timed out
	RuleUnsafe  = "unsafe"  // a link out of the tree, a special file, a file its owner cannot read
)

// Rules lists the rules a validation checks, in the order a reader lists
// each one's verdict.
func Rules() []string { return []string{RuleArea, RuleRole, RuleLease, RuleCommand, RuleUnsafe} }

// Violation is one broken rule. Path is empty for rule "command".
type Violation struct {
	Rule   string `json:"rule"`
	Path   string `json:"path,omitempty"`
	Detail string `json:"detail"`
}

// Validation is the outcome of checking one diff. It holds for the diff
// whose hash it carries, and for no other.
type Validation struct {
	DiffHash   string      `json:"diff_hash"`
	Passed     bool        `json:"passed"`
	Violations []Violation `json:"violations"`
	Actor      string      `json:"actor"`
	At         time.Time   `json:"at"`
}

// PathPolicy is a roles hook that replaces the workspace's policy:
// CheckPath returns nil when actor may write resource (a "file:PATH" or
// "artifact:NAME"), else an error whose text is the reason. Without one
// (Options.Policy nil) the workspace's own policy decides, by the rule the
// engine applies (workspace.WriteCheck).
type PathPolicy interface {
	CheckPath(ctx context.Context, actor, resource string) error
}

// AreasFunc returns the areas a task declares: path prefixes ("src/api/"),
// globs ("docs/*.md") or exact paths. No areas: the area rule is off.
type AreasFunc func(t workspace.Task) []string

// TaskAreas is the default AreasFunc: the task's own Areas, the ones a
// claim with AvoidOverlap keeps apart.
func TaskAreas(t workspace.Task) []string { return t.Areas }

// inArea reports whether p falls in area.
func inArea(area, p string) bool {
	switch {
	case strings.HasSuffix(area, "/**"):
		return strings.HasPrefix(p, strings.TrimSuffix(area, "**"))
	case strings.HasSuffix(area, "/"):
		return strings.HasPrefix(p, area)
	case strings.ContainsAny(area, "*?["):
		ok, err := path.Match(area, p)
		return err == nil && ok
	}
	return p == area || strings.HasPrefix(p, area+"/")
}

// checker holds what the path rules need, read once per validation.
type checker struct {
	actor  string
	areas  []string // nil: no area rule
	task   string
	leases []workspace.Lease
	policy PathPolicy            // a replacement of the workspace's policy, or nil
	writes *workspace.WriteCheck // the workspace's policy, when policy is nil
	as     workspace.Principal   // who the workspace's policy checks
}

func (m *Manager) newChecker(ctx context.Context, actor, task string) (*checker, error) {
	c := &checker{actor: actor, task: task, policy: m.opts.Policy, as: principalOf(ctx, actor)}
	if c.policy == nil {
		w, err := m.ws.WriteCheck(ctx)
		if err != nil {
			return nil, err
		}
		c.writes = w
	}
	if task != "" {
		t, err := m.ws.Tasks().Get(ctx, task)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", task, err)
		}
		c.areas = m.opts.Areas(t)
	}
	ls, err := m.ws.Locks().List(ctx)
	if err != nil {
		return nil, err
	}
	now := m.opts.Now()
	for _, l := range ls {
		if l.Owner != actor && l.ExpiresAt.After(now) {
			c.leases = append(c.leases, l)
		}
	}
	return c, nil
}

// principalOf is who actor's writes are checked as: ctx's principal (a
// server's token, with its roles) when it is actor, else actor with the
// policy's roles.
func principalOf(ctx context.Context, actor string) workspace.Principal {
	if p, ok := wsconn.PrincipalFrom(ctx); ok && p.Actor == actor {
		return p
	}
	return workspace.Principal{Actor: actor}
}

// role returns the policy's refusal of writing (del: removing) name, or nil.
func (c *checker) role(ctx context.Context, prefix, name string, del bool) error {
	if c.policy != nil {
		return c.policy.CheckPath(ctx, c.actor, prefix+name)
	}
	return c.writes.Check(c.as, name, del)
}

// check returns the violations of writing (del: removing) name, whose
// lease resources start with prefix ("file:" or "artifact:").
func (c *checker) check(ctx context.Context, prefix, name string, del bool) []Violation {
	var out []Violation
	if c.areas != nil {
		ok := false
		for _, a := range c.areas {
			ok = ok || inArea(a, name)
		}
		if !ok {
			out = append(out, Violation{Rule: RuleArea, Path: name, Detail: fmt.Sprintf("outside task %s's areas %s", c.task, strings.Join(c.areas, ","))})
		}
	}
	if err := c.role(ctx, prefix, name, del); err != nil {
		out = append(out, Violation{Rule: RuleRole, Path: name, Detail: err.Error()})
	}
	for _, l := range c.leases {
		held, ok := strings.CutPrefix(l.Resource, prefix)
		if ok && (held == name || inArea(strings.TrimSuffix(held, "/")+"/", name)) {
			out = append(out, Violation{Rule: RuleLease, Path: name, Detail: fmt.Sprintf("%s is leased by %s until %s", l.Resource, l.Owner, l.ExpiresAt.UTC().Format(time.RFC3339))})
		}
	}
	return out
}

// Validate runs the validator commands in the shadow, then checks every
// changed path against the task's areas, the policy, and others' leases;
// it records the outcome (shadow.validated) bound to the diff's hash.
func (m *Manager) Validate(ctx context.Context, ref, actor string) (Validation, error) {
	return m.validate(ctx, ref, actor, "", nil)
}

// ValidateDiff is Validate of d, a diff Diff returned for this shadow,
// without scanning the tree again when no validator commands are
// configured (commands may change files, so with them the tree is scanned
// after they ran, as Validate does). It is safe to pass a diff the tree
// has since moved from: the validation is bound to d's hash, recomputed
// here from d's changes, and Promote scans again and accepts only a tree
// whose diff has exactly that hash.
func (m *Manager) ValidateDiff(ctx context.Context, ref, actor string, d Diff) (Validation, error) {
	return m.validate(ctx, ref, actor, "", &d)
}

// validate checks the diff as actor's work; by ("" for actor) records
// the step: a checkpoint records as its operator while actor is paused.
func (m *Manager) validate(ctx context.Context, ref, actor, by string, given *Diff) (Validation, error) {
	reuse := given != nil && len(m.opts.Validators) == 0
	load := m.load
	if reuse {
		load = m.loadSummary // the diff is given: no base to compare with
	}
	md, err := load(ref)
	if err != nil {
		return Validation{}, err
	}
	if actor == "" {
		actor = md.Actor
	}
	if by == "" {
		by = actor
	}
	var vs []Violation
	for _, cmd := range m.opts.Validators {
		if v, ok := runValidator(ctx, md.Path, cmd, m.opts.ValidatorTimeout); !ok {
			vs = append(vs, v)
		}
	}
	var d Diff
	switch {
	case reuse:
		if given.Shadow != md.ID {
			return Validation{}, &workspace.InvalidError{Field: "diff", Reason: "is of shadow " + given.Shadow + ", not " + md.ID}
		}
		if h := diffHash(given.Changes); h != given.Hash {
			return Validation{}, &workspace.InvalidError{Field: "diff", Reason: "hash does not match its changes"}
		}
		d = *given
	default:
		d, err = diffOf(md) // after the commands: a formatter may have changed files
		if err != nil {
			return Validation{}, err
		}
	}
	c, err := m.newChecker(ctx, actor, md.Task)
	if err != nil {
		return Validation{}, err
	}
	for _, s := range d.Skipped {
		vs = append(vs, Violation{Rule: RuleUnsafe, Path: s.Path, Detail: s.Reason + ": never promoted"})
	}
	for _, ch := range d.Changes {
		if ch.New != nil && ch.New.isLink() && linkEscapes(ch.Path, ch.New.Link) {
			vs = append(vs, Violation{Rule: RuleUnsafe, Path: ch.Path, Detail: "symbolic link out of the tree: " + ch.New.Link})
		}
		if ch.New != nil && !ch.New.isLink() && ch.New.Mode&0o400 == 0 {
			vs = append(vs, Violation{Rule: RuleUnsafe, Path: ch.Path, Detail: fmt.Sprintf("unreadable by its owner (mode %o)", uint32(ch.New.Mode))})
		}
		for i, p := range ch.touched() {
			del := ch.Kind == Deleted || (ch.Kind == Renamed && i == 0)
			vs = append(vs, c.check(ctx, "file:", p, del)...)
		}
	}
	v := Validation{DiffHash: d.Hash, Passed: len(vs) == 0, Violations: vs, Actor: actor, At: m.opts.Now().UTC()}
	md.Validated = &v
	if err := m.saveMeta(md, false); err != nil {
		return Validation{}, err
	}
	return v, m.record(ctx, md, by, EventValidated, summary(v))
}

func summary(v Validation) string {
	if v.Passed {
		return "passed, diff " + v.DiffHash[:12]
	}
	return fmt.Sprintf("%d violations, diff %s", len(v.Violations), v.DiffHash[:12])
}

// maxOutput is how much of a failing validator's output a violation keeps.
const maxOutput = 2048

// runValidator runs cmd with sh -c in dir, killing its process group at
// the timeout; a failure is a violation carrying the output's tail.
func runValidator(ctx context.Context, dir, cmd string, timeout time.Duration) (Violation, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", cmd) // #nosec G204 -- validators are the operator's configured commands
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if err == nil {
		return Violation{}, true
	}
	tail := out.String()
	if len(tail) > maxOutput {
		tail = "…" + tail[len(tail)-maxOutput:]
	}
	why := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out after " + timeout.String()
	}
	return Violation{Rule: RuleCommand, Detail: fmt.Sprintf("%s: %s\n%s", cmd, why, strings.TrimSpace(tail))}, false
}
