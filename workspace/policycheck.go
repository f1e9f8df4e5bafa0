package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/policy"
)

// Policy reads and compiles the workspace's policy (PolicyArtifact): nil when
// there is none. A stored policy that does not parse is an error matching
// policy.ErrInvalid. Every actor may read the policy, so ctx's principal
// does not matter.
func (ws *Workspace) Policy(ctx context.Context) (*policy.Policy, error) {
	art, err := ws.Artifacts().Get(ctx, ByName(PolicyArtifact))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := policy.Parse(art.Content)
	if err != nil {
		return nil, fmt.Errorf("the stored policy (version %d) is invalid: %w", art.Version, err)
	}
	return p, nil
}

// WriteCheck answers ahead of a write whether a principal may write or
// delete an artifact, by the rule the engine applies when the write comes:
// the policy's artifacts_write (artifacts_delete) patterns for the
// principal's roles, the policy artifact itself needing the admin
// "policy" right, and a stored policy that does not parse refusing
// everything. Shadow validation, the merge queue and `wsctl check write`
// use it for paths that are about to become artifacts or commits.
type WriteCheck struct {
	pol *policy.Policy // nil: no policy
	bad error          // the stored policy does not parse
}

// WriteCheck reads the workspace's policy once for a run of checks.
func (ws *Workspace) WriteCheck(ctx context.Context) (*WriteCheck, error) {
	p, err := ws.Policy(ctx)
	if errors.Is(err, policy.ErrInvalid) {
		return &WriteCheck{bad: err}, nil
	}
	if err != nil {
		return nil, err
	}
	return &WriteCheck{pol: p}, nil
}

// None reports whether there is no policy: every write is allowed.
func (c *WriteCheck) None() bool { return c.pol == nil && c.bad == nil }

// Decide returns the action and object a write (or, with del, a delete)
// of the artifact name needs, and the policy's decision for p: p.Roles
// when set, else the policy's roles of p.Actor. With no policy the
// decision allows it.
func (c *WriteCheck) Decide(p Principal, name string, del bool) (policy.Action, string, policy.Decision) {
	act, obj := policy.ArtifactWrite, name
	if del {
		act = policy.ArtifactDelete
	}
	if name == PolicyArtifact {
		act, obj = policy.AdminPolicy, ""
	}
	switch {
	case c.bad != nil && act != policy.AdminPolicy:
		return act, obj, policy.Decision{Rule: policy.RuleKey(act)}
	case c.pol == nil:
		return act, obj, policy.Decision{Allowed: true}
	}
	roles := p.Roles
	if roles == nil {
		roles = c.pol.RolesOf(p.Actor)
	}
	return act, obj, c.pol.Check(roles, act, obj)
}

// Check is Decide as an error: nil when allowed, else a *ForbiddenError
// naming the actor, the rule and the object.
func (c *WriteCheck) Check(p Principal, name string, del bool) error {
	act, obj, d := c.Decide(p, name, del)
	if d.Allowed {
		return nil
	}
	reason := d.Reason()
	if c.bad != nil {
		reason = fmt.Sprintf("the stored policy is invalid; fix %s first (%v)", PolicyArtifact, c.bad)
	}
	return &ForbiddenError{Actor: p.Actor, Roles: d.Roles, Action: string(act), Object: obj, Rule: d.Rule, Reason: reason}
}
