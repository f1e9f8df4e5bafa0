package workspace

import "context"

// Names the workspace keeps for its own records.
const (
	// PolicyArtifact is the reserved artifact that holds the workspace's
	// policy (TOML, see package policy). While it exists the engine checks
	// every operation against it; without it everything is allowed.
	// Writing, rolling back or deleting it needs the admin "policy" right,
	// and a new version must parse and must leave its author that right,
	// so that no one locks the team out by accident. Every actor may read
	// it.
	PolicyArtifact = ".agentspace/policy.toml"
	// PinKind is the kind of the notes that pin artifact versions against
	// retention (see Workspace.Pin), each keyed "ID@VERSION". The kind is
	// reserved: only Pin, Unpin and a batch op's Pin write it.
	PinKind = "pin"
)

// Principal is who an operation acts for, carried by its context: the
// actor, and the roles to check when they are not the policy's roles of
// that actor (a server's token names its role).
type Principal struct {
	Actor string
	// Roles, when non-nil, are checked instead of the roles the policy
	// gives Actor.
	Roles []string
	// Bound says Actor was verified (a server's token): a write under this
	// principal may name no other actor. An unbound principal (AsActor, an
	// in-process caller's self-declared identity) filters reads and lends
	// its roles, but binds nothing.
	Bound bool
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p. Reads check their result against
// the policy for p; writes use p.Roles (when set) for the write's actor.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// AsActor returns ctx acting as actor, with the roles the policy gives it.
// Reads made with such a context leave out what actor may not read.
func AsActor(ctx context.Context, actor string) context.Context {
	return WithPrincipal(ctx, Principal{Actor: actor})
}

// PrincipalFrom returns the principal ctx carries, for the code that
// checks it (internal/wsconn.PrincipalFrom).
func (bridge) PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
