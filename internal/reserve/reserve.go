// Package reserve is the registry of reserved note kinds: kinds whose notes
// are the system's own records (tokens, pins, worktrees, change sets), which
// only the layer that declared them may write. The owning layer (server,
// gitwork, shadow, workspace's pins) calls Register from a package
// variable; the engine in workspace/driver enforces it. It is internal:
// every layer that owns records is in this module, and neither the
// reservation nor the engine's lookups widen the user API.
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
	Right  string // the policy action a principal needs to use it through its owner; "" for the note rights on the kind
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
func (k *Key) Entry() Entry { return k.e }

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
	kindRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })
)

// Register reserves e.Kind and returns its key. It panics on a malformed or
// already reserved kind: reservations are made in init, as drivers register.
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
	k, ok := byKind[kind]
	mu.RUnlock()
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
		if g.e.Pins {
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
