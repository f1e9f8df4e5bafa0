package engine

import (
	"context"
	"fmt"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
)

// Reserved note kinds (internal/reserve) are enforced here, on every
// backend and with or without a policy: a note op on a reserved kind runs
// only in a context that carries the kind's key, and a sealed kind is not
// read without it. The refusal comes before anything is queued, so a
// refused write leaves the log as it was (no denied event: the caller
// used the wrong operation; no rule was consulted).

// checkReserved refuses op if it writes a reserved kind that ctx has no
// key for.
func checkReserved(ctx context.Context, actor string, op workspace.Op) error {
	s, err := specOf(op)
	if err != nil {
		return err
	}
	kind := s.reserved(op)
	if kind == "" {
		return nil
	}
	return reservedRefusal(ctx, actor, policy.NoteWrite, kind, false)
}

// reservedRefusal returns the refusal of action a on notes of kind, or nil.
// A read is refused only for a sealed kind.
func reservedRefusal(ctx context.Context, actor string, a policy.Action, kind string, read bool) error {
	e, ok := reserve.Lookup(kind)
	if !ok || (read && !e.Sealed) || reserve.Granted(ctx, kind) {
		return nil
	}
	verb := "written"
	if read {
		verb = "read"
	}
	return &workspace.ForbiddenError{Actor: actor, Action: string(a), Object: kind,
		Reason: fmt.Sprintf("notes of kind %q are reserved records: %s only through %s", kind, verb, e.Owner)}
}

// reservedKind reports whether kind is reserved.
func reservedKind(kind string) bool {
	_, ok := reserve.Lookup(kind)
	return ok
}

// principalActor is the actor ctx's principal names, "" without one: the
// reader named in a read's refusal.
func principalActor(ctx context.Context) string {
	p, _ := wsconn.PrincipalFrom(ctx)
	return p.Actor
}

// recordFilter returns, for a listing read under allow (readFilter's),
// the predicate of the records ctx's principal may read as far as the
// artifacts they name go (reserve.Entry.Artifacts); nil when allow is.
func recordFilter(allow func(policy.Action, string) bool) func(workspace.Note) bool {
	if allow == nil {
		return nil
	}
	return func(n workspace.Note) bool { return recordReadable(allow, n) }
}

// recordReadable reports whether n may be read under allow as far as the
// artifacts it names go; a kind that names none passes.
func recordReadable(allow func(policy.Action, string) bool, n workspace.Note) bool {
	e, ok := reserve.Lookup(n.Kind)
	if !ok || e.Artifacts == nil {
		return true
	}
	names, err := e.Artifacts(n.Body)
	if err != nil {
		return false
	}
	for _, name := range names {
		if !artifactReadable(allow, name) {
			return false
		}
	}
	return true
}

// allowRecordRead refuses n to ctx's principal when n names an artifact
// the principal may not read (recordReadable), and records the refusal.
// The refusal names the record, not the artifact: the artifact's name is
// itself something the reader may not read.
func (h *handle) allowRecordRead(ctx context.Context, n workspace.Note) error {
	allow, err := h.readFilter(ctx)
	if allow == nil || err != nil || recordReadable(allow, n) {
		return err
	}
	p, _ := wsconn.PrincipalFrom(ctx)
	fe := &workspace.ForbiddenError{Actor: p.Actor, Roles: p.Roles, Action: string(policy.ArtifactRead), Object: n.Kind + "/" + n.Key,
		Rule:   policy.RuleKey(policy.ArtifactRead),
		Reason: fmt.Sprintf("this %s record holds or names artifacts the roles may not read", n.Kind)}
	h.recordDenied(ctx, fe, workspace.Subject{Kind: "note", Name: n.Kind + "/" + n.Key})
	return fe
}
