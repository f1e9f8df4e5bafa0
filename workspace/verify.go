package workspace

import (
	"context"
	"errors"
	"fmt"
)

// VerifyReport is what Verify found: the event log's hash chain checked
// from its floor to its head, and every artifact version's content
// checked against its SHA-256.
type VerifyReport struct {
	Floor int64 `json:"floor"`
	Head  int64 `json:"head"`
	// Events is the number of events whose link was checked.
	Events int64 `json:"events"`
	// Unchained counts the events at the start of the log written before
	// the store kept the chain (a store migrated from an older schema):
	// they have no hash and cannot be checked.
	Unchained int64 `json:"unchained,omitempty"`
	// HeadHash is the hash of the newest event (hex): kept somewhere else,
	// it lets a later Verify prove that nothing up to it was rewritten.
	HeadHash string `json:"head_hash"`
	// Versions is the number of artifact versions whose content was checked.
	Versions int64 `json:"versions"`
	// BrokenSeq is the first seq whose link does not hold (0 if none):
	// the event was edited, or one before it, or it is missing.
	BrokenSeq int64 `json:"broken_seq,omitempty"`
	// Problems describe each failure found, the chain's first.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether nothing was found broken.
func (r VerifyReport) OK() bool { return r.BrokenSeq == 0 && len(r.Problems) == 0 }

// Verifier is implemented by every Workspace that Open returns (and
// driver.New) over a store that keeps the hash chain.
type Verifier interface {
	Verify(ctx context.Context) (VerifyReport, error)
}

// Verify checks ws's event log chain and artifact contents from one
// consistent snapshot. A broken chain or content is reported in the
// VerifyReport, not as an error; the error is for failures to read.
func Verify(ctx context.Context, ws Workspace) (VerifyReport, error) {
	v, ok := ws.(Verifier)
	if !ok || v == nil {
		return VerifyReport{}, invalid("workspace", "Verify needs a Workspace made by Open or driver.New, not %T", ws)
	}
	return v.Verify(ctx)
}

// FileBackuper is implemented by every Workspace that Open returns (and
// driver.New); BackupFile works where the store is kept in one file
// (SQLite) and returns an error matching errors.ErrUnsupported elsewhere.
type FileBackuper interface {
	BackupFile(ctx context.Context, path string) (VerifyReport, error)
}

// BackupFile writes a copy of the file that holds ws's store to path,
// which must not exist: one consistent snapshot, taken without holding up
// writers (SQLite: VACUUM INTO). The copy must pass the file format's own
// integrity check and Verify's chain and contents check, read on the copy
// read-only; a copy that fails is removed and the error says why. A store
// not kept in one file (json, postgres, a server) gives an error matching
// errors.ErrUnsupported: back it up with Export.
func BackupFile(ctx context.Context, ws Workspace, path string) (VerifyReport, error) {
	b, ok := ws.(FileBackuper)
	if !ok || b == nil {
		return VerifyReport{}, fmt.Errorf("backup: %T keeps no file: %w", ws, errors.ErrUnsupported)
	}
	return b.BackupFile(ctx, path)
}
