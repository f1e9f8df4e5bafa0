package workspace

import (
	"context"
	"path/filepath"

	"github.com/agentspace/agentspace/internal/durable"
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

// verifier and fileBackuper are the conn capabilities Verify and Backup use.
type verifier interface {
	Verify(ctx context.Context) (VerifyReport, error)
}

type fileBackuper interface {
	BackupFile(ctx context.Context, path string) (VerifyReport, error)
}

// Verify checks the event log's hash chain and the artifact contents from
// one consistent snapshot. A broken chain or content is reported in the
// VerifyReport, not as an error; the error is for failures to read.
func (ws *Workspace) Verify(ctx context.Context) (VerifyReport, error) {
	v, ok := ws.c.(verifier)
	if !ok {
		return VerifyReport{}, ws.unsupported("verify")
	}
	return v.Verify(ctx)
}

// Backup writes a copy of the file that holds the store to path, which
// must not exist: one consistent snapshot, taken without holding up
// writers (SQLite: VACUUM INTO). The copy must pass the file format's own
// integrity check and Verify's chain and contents check, read on the copy
// read-only; a copy that fails is removed and the error says why. A store
// not kept in one file (json, postgres, a server) gives an error matching
// errors.ErrUnsupported: back it up with Export. The copy is made readable
// by its owner only, as the store is, and it and its directory are synced
// before Backup returns. Package backup writes, rotates and restores whole
// directories of backups.
func (ws *Workspace) Backup(ctx context.Context, path string) (VerifyReport, error) {
	b, ok := ws.c.(fileBackuper)
	if !ok {
		return VerifyReport{}, ws.unsupported("backup")
	}
	v, err := b.BackupFile(ctx, path)
	if err != nil {
		return v, err
	}
	if err := durable.SyncFile(path, 0o600); err != nil {
		return v, err
	}
	return v, durable.SyncDir(filepath.Dir(path))
}
