package workspace

import (
	"context"

	"github.com/agentspace/agentspace/internal/reserve"
)

// Reservation declares a note kind that holds a layer's own records
// (tokens, worktrees, change sets). Notes of a reserved kind are written
// and deleted only by code holding the kind's key (see Reserve); a plain
// note write of the kind, from any face, is refused with a
// *ForbiddenError and writes nothing. Reserved kinds are left out of note
// listings that name no kind.
type Reservation struct {
	// Kind is the note kind reserved (a lower-case word).
	Kind string
	// Owner names the operations that write the kind, for refusals:
	// "the server's token operations".
	Owner string
	// Sealed kinds are not readable as notes at all without the key: Get
	// and a List of the kind are refused.
	Sealed bool
	// Right is the policy action (e.g. "admin.tokens") a principal needs
	// to write or read the kind through its owner; empty for the note
	// rights on the kind, as for any note.
	Right string
}

// KindKey is the capability to write notes of one reserved kind. Only the
// layer that reserved the kind holds it.
type KindKey struct{ k *reserve.Key }

// Reserve reserves r.Kind in this process and returns its key; call it from
// the owning package's init or a package variable. It panics on a
// malformed or already reserved kind.
func Reserve(r Reservation) *KindKey {
	return &KindKey{reserve.Register(reserve.Entry{Kind: r.Kind, Owner: r.Owner, Sealed: r.Sealed, Right: r.Right})}
}

// Grant returns ctx allowed to write (and, for a sealed kind, read) notes
// of k's kind. The grant is a context value that cannot cross a network:
// over a served workspace, reserved records are written only by the
// server's own operations.
func (k *KindKey) Grant(ctx context.Context) context.Context { return k.k.Grant(ctx) }
