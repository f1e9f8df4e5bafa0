package workspace

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentspace/agentspace/policy"
)

// RoleChange is what GrantRole and RevokeRole did.
type RoleChange struct {
	Actor string   `json:"actor"`
	Role  string   `json:"role"`
	Roles []string `json:"roles"` // the actor's roles after the change
	// Changed is false when the actor already held (or did not hold) the
	// role: nothing was written.
	Changed bool `json:"changed"`
	// Version is the policy's version after the change (or as found).
	Version int64 `json:"version"`
	// Canonical is set when the file's layout could not be edited in
	// place and the policy was rendered anew, without its comments.
	Canonical bool `json:"canonical,omitempty"`
}

// roleEditRetries bounds how often a role change re-reads the policy after
// another writer changed it between the read and the write.
const roleEditRetries = 5

// GrantRole gives actor role in the workspace's policy, as w.Actor: a new version of
// PolicyArtifact, written only if the policy is still the version read
// (w.IfVersion when set, else the version read, retried on a conflict).
// The actor's entry in [actors] becomes exact: the roles it had (by name,
// by pattern or by default_role) plus role. The write is the engine's:
// it needs the admin "policy" right and may not take it from its author.
// There must be a policy (ErrNotFound) and role must be one it defines, or
// the built-in admin (ErrInvalid).
func (ws *Workspace) GrantRole(ctx context.Context, w Write, actor, role string) (RoleChange, error) {
	return changeRole(ctx, ws, w, actor, role, true)
}

// RevokeRole takes role from actor in the workspace's policy, as GrantRole gives
// one: the actor's entry becomes exact, its roles less role (an actor left
// with none has no rights, whatever default_role says).
func (ws *Workspace) RevokeRole(ctx context.Context, w Write, actor, role string) (RoleChange, error) {
	return changeRole(ctx, ws, w, actor, role, false)
}

func changeRole(ctx context.Context, ws *Workspace, w Write, actor, role string, grant bool) (RoleChange, error) {
	if actor == "" || len(actor) > MaxActorLen {
		return RoleChange{}, &InvalidError{Field: "actor", Reason: fmt.Sprintf("want 1 to %d bytes", MaxActorLen)}
	}
	if err := checkPrintable("actor", actor, false); err != nil {
		return RoleChange{}, err
	}
	for attempt := 0; ; attempt++ {
		rc, err := changeRoleOnce(ctx, ws, w, actor, role, grant)
		var ce *ConflictError
		if w.IfVersion == 0 && errors.As(err, &ce) && attempt < roleEditRetries {
			continue
		}
		return rc, err
	}
}

func changeRoleOnce(ctx context.Context, ws *Workspace, w Write, actor, role string, grant bool) (RoleChange, error) {
	rc := RoleChange{Actor: actor, Role: role}
	art, err := ws.Artifacts().Get(ctx, ByName(PolicyArtifact))
	if errors.Is(err, ErrNotFound) {
		return rc, fmt.Errorf("no policy to change (apply one first): %w", err)
	}
	if err != nil {
		return rc, err
	}
	rc.Version = art.Version
	p, err := policy.Parse(art.Content)
	if err != nil {
		return rc, &InvalidError{Field: "policy", Reason: fmt.Sprintf("the stored policy (version %d) is invalid; fix it first: %v", art.Version, err)}
	}
	f := p.File()
	if _, ok := f.Roles[role]; !ok && role != policy.AdminRole {
		return rc, &InvalidError{Field: "role", Reason: fmt.Sprintf("%q is not a role of the policy", role)}
	}
	cur := slices.Clone(p.RolesOf(actor))
	holds := slices.Contains(cur, role)
	next := cur
	switch {
	case grant && !holds:
		next = append(cur, role)
	case !grant && holds:
		next = slices.DeleteFunc(cur, func(r string) bool { return r == role })
	}
	if next == nil {
		next = []string{}
	}
	rc.Roles = next
	// Nothing to do: it holds (or lacks) the role already.
	if grant == holds {
		return rc, nil
	}
	src, canonical, err := policy.SetActorRoles(art.Content, actor, next)
	if err != nil {
		return rc, &InvalidError{Field: "policy", Reason: err.Error()}
	}
	wr := w
	if wr.IfVersion == 0 {
		wr.IfVersion = art.Version
	}
	if wr.Message == "" {
		verb := "grant"
		if !grant {
			verb = "revoke"
		}
		wr.Message = fmt.Sprintf("%s %s %s", verb, actor, role)
	}
	out, err := ws.Artifacts().Update(ctx, wr, ByName(PolicyArtifact), ArtifactChange{Content: src})
	if err != nil {
		return rc, err
	}
	rc.Changed, rc.Version, rc.Canonical = true, out.Version, canonical
	return rc, nil
}
