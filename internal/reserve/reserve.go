// Package reserve is the registry of reserved note kinds: kinds whose notes
// are the system's own records (tokens, pins, messages, worktrees, change
// sets), which only the layer that owns them may write. Every kind this
// module reserves is declared in one table here (declared), so the engine
// (workspace/engine) refuses a plain read of a sealed record or a plain
// write of any record whichever packages a program links: a program that
// links only a backend cannot read the server's token notes as notes. The
// owning layer (server, gitwork, shadow, workspace's pins, the engine's
// messages) takes its key with Own from a package variable. It is
// internal: every layer that owns records is in this module, and neither
// the reservation nor the engine's lookups widen the user API.
//
// The capability is a context value keyed by an unexported type, holding the
// *Key its layer got from Register: a context built from a request (HTTP,
// MCP, a CLI flag) can carry it only if Go code of the owning layer put it
// there, so no face can forge it.
package reserve

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
)

// Entry describes one reserved kind.
type Entry struct {
	Kind   string // the note kind
	Owner  string // who writes it, for refusals: "the server's token operations"
	Sealed bool   // never read as a note, not even listed, without the key
	// Credential marks records that grant access (the server's tokens):
	// an import restores them only when asked (ArchiveOptions.WithSealed),
	// so a backup, or a file made to look like one, grants nobody access
	// by being restored. Other sealed records (messages, pauses) are the
	// team's state and are always restored.
	Credential bool
	Right      string // the policy action a principal needs to use it through its owner; "" for the note rights on the kind
	// Pins lets the owner's batches pin the versions their ops write (a
	// batch op's Pin) as the system's bookkeeping: a batch whose context
	// carries the key asks its actor for no pin right (a change set's
	// promotion keeps what it promotes whoever promotes it). Without such
	// a key an op's Pin needs what Workspace.Pin needs.
	Pins bool
	// Artifacts, when set, names the artifacts a record's body speaks of
	// (content staged for them, their names): the engine lets a principal
	// read such a record, by get or in a listing, only if its policy lets
	// it read every one of them, so a record is never a way around the
	// artifacts' read rules. A body it cannot parse is read by no
	// principal that a policy governs.
	Artifacts func(body string) ([]string, error)
}

// Key is the capability to write (and, when sealed, read) notes of one
// reserved kind.
type Key struct{ e Entry }

// Entry returns the reservation k holds.
func (k *Key) Entry() Entry {
	mu.RLock()
	defer mu.RUnlock()
	return k.e
}

type grantKey struct{}

// grants is the set of keys a context carries: a small immutable list,
// copied when one is added.
type grants []*Key

// Grant returns ctx carrying k as well as any key ctx already carries.
func (k *Key) Grant(ctx context.Context) context.Context {
	old, _ := ctx.Value(grantKey{}).(grants)
	for _, g := range old {
		if g == k {
			return ctx
		}
	}
	next := make(grants, len(old), len(old)+1)
	copy(next, old)
	return context.WithValue(ctx, grantKey{}, append(next, k))
}

var (
	mu     sync.RWMutex
	byKind = map[string]*Key{}
	owned  = map[string]bool{} // declared kinds whose owner took its key
	kindRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })
)

// The message kinds' owner.
const msgOwner = "the message operations (Workspace.Messages)"

// declared are the kinds this module reserves, all of them: what the
// engine enforces for each holds in every program, whether or not it links
// the owner.
var declared = []Entry{
	{Kind: "pin", Owner: "Workspace.Pin and Unpin"},
	{Kind: "msg", Owner: msgOwner, Sealed: true},
	{Kind: "msg-box", Owner: msgOwner, Sealed: true},
	{Kind: "msg-wait", Owner: msgOwner, Sealed: true},
	{Kind: "msg-due", Owner: msgOwner, Sealed: true},
	{Kind: "msg-thread", Owner: msgOwner, Sealed: true},
	{Kind: "msg-cursor", Owner: msgOwner, Sealed: true},
	{Kind: "msg-last", Owner: msgOwner, Sealed: true},
	{Kind: "msg-count", Owner: msgOwner, Sealed: true},
	{Kind: "pause", Owner: "PauseActorOp and ResumeActorOp", Sealed: true},
	{Kind: "token", Owner: "the server's token operations", Sealed: true, Credential: true, Right: "admin.tokens"},
	{Kind: "worktree", Owner: "the worktree operations (package gitwork)"},
	{Kind: "shadow", Owner: "the shadow operations (package shadow)"},
	// A change set names artifacts; until package shadow gives the parser
	// (Own), no principal a policy governs may read one.
	{Kind: "changeset", Owner: "the change-set operations (package shadow)", Pins: true, Artifacts: unparsed},
}

// unparsed is the Artifacts of a declared kind whose owner is not linked:
// its records name artifacts this program cannot list.
func unparsed(string) ([]string, error) {
	return nil, fmt.Errorf("reserve: the owner of this record is not linked into the program")
}

func init() {
	for _, e := range declared {
		if e.Kind == "" || e.Owner == "" || byKind[e.Kind] != nil { // the kinds' shape: TestDeclaredKindsAreWellFormed
			panic(fmt.Sprintf("reserve: bad declaration %+v", e))
		}
		byKind[e.Kind] = &Key{e: e}
	}
}

// Own returns the key of kind, one of the declared kinds, to its owner;
// artifacts, when not nil, is the kind's Entry.Artifacts (the owner's
// parser of its records). It panics on a kind not declared or owned
// twice: keys are taken in package variables, as drivers register.
func Own(kind string, artifacts func(body string) ([]string, error)) *Key {
	mu.Lock()
	defer mu.Unlock()
	k, ok := byKind[kind]
	if !ok || owned[kind] {
		panic(fmt.Sprintf("reserve: kind %q is not declared, or is owned twice", kind))
	}
	if artifacts != nil {
		k.e.Artifacts = artifacts
	}
	owned[kind] = true
	return k
}

// Register reserves e.Kind, one not declared by this module (tests reserve
// their own), and returns its key. It panics on a malformed or already
// reserved kind: reservations are made in init, as drivers register.
func Register(e Entry) *Key {
	if !kindRE().MatchString(e.Kind) || e.Owner == "" {
		panic(fmt.Sprintf("reserve: bad reservation %+v", e))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := byKind[e.Kind]; dup {
		panic(fmt.Sprintf("reserve: kind %q reserved twice", e.Kind))
	}
	k := &Key{e: e}
	byKind[e.Kind] = k
	return k
}

// Lookup returns the reservation of kind, if it is reserved.
func Lookup(kind string) (Entry, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := byKind[kind]
	if !ok {
		return Entry{}, false
	}
	return k.e, true
}

// Granted reports whether ctx carries the key of kind. An unreserved kind
// needs no key and is always granted.
func Granted(ctx context.Context, kind string) bool {
	mu.RLock()
	k, ok := byKind[kind]
	mu.RUnlock()
	if !ok {
		return true
	}
	gs, _ := ctx.Value(grantKey{}).(grants)
	for _, g := range gs {
		if g == k {
			return true
		}
	}
	return false
}

// GrantedPins reports whether ctx carries the key of a kind reserved with
// Pins: whether a batch run with ctx pins what it writes as the system's
// bookkeeping.
func GrantedPins(ctx context.Context) bool {
	gs, _ := ctx.Value(grantKey{}).(grants)
	for _, g := range gs {
		if g.e.Pins { // Pins is set at declaration and never changes
			return true
		}
	}
	return false
}

// Kinds returns every reserved kind, sorted.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(byKind))
	for k := range byKind {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PinKey is the key of the pin note (kind "pin", workspace.PinKind) that
// keeps version of artifact id from retention: "ID@VERSION".
func PinKey(id string, version int64) string { return fmt.Sprintf("%s@%d", id, version) }
