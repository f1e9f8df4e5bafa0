// Package backup writes, verifies, rotates and restores backups of a
// workspace, as `wsctl backup` and `wsctl restore` do: a library user gets
// the same files, checked the same way, and made as durable (each file and
// the directory entry naming it are fsynced before Write returns).
//
// A SQLite store is copied with VACUUM INTO (Workspace.Backup) to
// DIR/agentspace-TIME.db; any other store, or any with Options.Archive, is
// written as the archive of Workspace.Export to DIR/agentspace-TIME.ndjson,
// imported into a scratch SQLite store whose chain and contents must verify
// and whose export must equal the file byte for byte. A backup that fails
// its check never gets its name. Backups are readable by their owner only.
package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	// The scratch stores that check an archive and read a file copy.
	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/internal/durable"
	"github.com/agentspace/agentspace/workspace"
)

// The names of backups: Prefix, a UTC time that sorts, then
// ArchiveSuffix or FileSuffix.
const (
	Prefix        = "agentspace-"
	ArchiveSuffix = ".ndjson"
	FileSuffix    = ".db"
)

// Options configure Write.
type Options struct {
	// Keep is how many of the newest backups in the directory to keep,
	// removing older ones after a new one is written (0 keeps all).
	Keep int
	// Archive writes the export archive even where the store's file can
	// be copied.
	Archive bool
}

// Result is what Write did.
type Result struct {
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
	// Format is "archive" (Export's) or "sqlite" (a copy of the file).
	Format string `json:"format"`
	// Counts are an archive's records; Verified is what the check of a
	// file copy read.
	Counts   *workspace.ArchiveStats `json:"counts,omitempty"`
	Verified *workspace.VerifyReport `json:"verified,omitempty"`
	HeadHash string                  `json:"head_hash"`
	// Removed are the older backups Options.Keep removed.
	Removed []string `json:"removed,omitempty"`
}

// NotVerifiedError is a backup, or a store restored from one, that does
// not pass its check; a backup that fails is not kept.
type NotVerifiedError struct {
	What     string // "backup FILE" or "restore"
	Problems []string
	Err      error // what failed, when it is an error rather than problems found
}

func (e *NotVerifiedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s failed verification, not kept: %v", e.What, e.Err)
	}
	return fmt.Sprintf("%s: the restored store does not verify: %s", e.What, strings.Join(e.Problems, "; "))
}

func (e *NotVerifiedError) Unwrap() error { return e.Err }

// NoBackupsError is a directory that holds no backups.
type NoBackupsError struct{ Dir string }

func (e *NoBackupsError) Error() string {
	return fmt.Sprintf("%s holds no backups (%s*%s or %s*%s)", e.Dir, Prefix, ArchiveSuffix, Prefix, FileSuffix)
}

// Write writes a verified backup of ws into dir (created 0750 if
// missing), then removes the oldest beyond opts.Keep.
func Write(ctx context.Context, ws *workspace.Workspace, dir string, opts Options) (Result, error) {
	if opts.Keep < 0 {
		return Result{}, &workspace.InvalidError{Field: "keep", Reason: fmt.Sprintf("%d: want a count, at least 0 (0 keeps every backup)", opts.Keep)}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Result{}, err
	}
	var r Result
	err := errors.ErrUnsupported
	if !opts.Archive {
		r, err = writeFile(ctx, ws, dir)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		r, err = writeArchive(ctx, ws, dir)
	}
	if err != nil {
		return r, err
	}
	r.Removed, err = Rotate(dir, opts.Keep)
	return r, err
}

// name is a new backup's file name: the names sort by time.
func name(suffix string) string {
	return Prefix + time.Now().UTC().Format("20060102T150405.000000Z") + suffix
}

// writeFile copies the file of ws's store into dir, verified
// (Workspace.Backup), readable by its owner only, as the store is;
// errors.ErrUnsupported if the store has no file.
func writeFile(ctx context.Context, ws *workspace.Workspace, dir string) (Result, error) {
	n := name(FileSuffix)
	final := filepath.Join(dir, n)
	// VACUUM INTO creates its file with the default mode and will not
	// write into one made beforehand: the copy is written inside a
	// directory of its own (0700, so nobody else can open it meanwhile)
	// and made 0600 before it gets its name.
	priv, err := os.MkdirTemp(dir, ".backup-*")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(priv)
	tmp := filepath.Join(priv, n)
	v, err := ws.Backup(ctx, tmp)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return Result{}, err
		}
		return Result{}, &NotVerifiedError{What: "backup " + final, Err: err}
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return Result{}, err
	}
	if err := durable.Rename(tmp, final); err != nil {
		return Result{}, err
	}
	return Result{File: final, Bytes: fi.Size(), Format: "sqlite", Verified: &v, HeadHash: v.HeadHash}, nil
}

// writeArchive exports ws to a new file in dir and verifies it before
// giving it its final name.
func writeArchive(ctx context.Context, ws *workspace.Workspace, dir string) (Result, error) {
	n := name(ArchiveSuffix)
	final := filepath.Join(dir, n)
	tmp := filepath.Join(dir, "."+n+".tmp")
	r := Result{Format: "archive", Counts: &workspace.ArchiveStats{}}
	err := durable.WriteFile(tmp, func(w io.Writer) error {
		var err error
		*r.Counts, err = ws.Export(ctx, w, workspace.ArchiveOptions{})
		return err
	})
	if err != nil {
		return r, err
	}
	defer os.Remove(tmp)
	data, err := os.ReadFile(tmp) // #nosec G304 -- the file this function just wrote
	if err != nil {
		return r, err
	}
	if r.HeadHash, err = VerifyArchive(ctx, data); err != nil {
		return r, &NotVerifiedError{What: "backup " + final, Err: err}
	}
	if err := durable.Rename(tmp, final); err != nil {
		return r, err
	}
	r.File, r.Bytes = final, int64(len(data))
	return r, nil
}

// VerifyArchive imports an archive into a scratch SQLite store, verifies
// that store's chain and contents, and checks that its export is the
// archive byte for byte. It returns the chain's head hash.
func VerifyArchive(ctx context.Context, data []byte) (string, error) {
	scratch, err := os.MkdirTemp("", "agentspace-verify-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	// A SQLite file, not a json store: a json store holds the whole log
	// in memory and rewrites as it grows (it took 12 minutes to take in a
	// million events), where SQLite takes the import as a stream of
	// batches. Nothing needs the scratch copy to survive a crash, so it
	// commits without fsync.
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(scratch, "ws.db")+"?ws_synchronous=off", workspace.Options{Private: true})
	if err != nil {
		return "", err
	}
	defer ws.Close()
	// The scratch store must export the same bytes, token records too; it
	// is removed unopened by anyone else.
	if _, err := ws.Import(ctx, bytes.NewReader(data), workspace.ArchiveOptions{WithSealed: true}); err != nil {
		return "", err
	}
	r, err := ws.Verify(ctx)
	if err != nil {
		return "", err
	}
	if !r.OK() {
		return "", fmt.Errorf("restored copy does not verify: %s", strings.Join(r.Problems, "; "))
	}
	var again bytes.Buffer
	if _, err := ws.Export(ctx, &again, workspace.ArchiveOptions{}); err != nil {
		return "", err
	}
	if !bytes.Equal(again.Bytes(), data) {
		return "", errors.New("restored copy exports different bytes")
	}
	return r.HeadHash, nil
}

// Rotate removes the oldest backups in dir beyond the newest keep (0
// keeps all), and syncs dir.
func Rotate(dir string, keep int) ([]string, error) {
	if keep == 0 {
		return nil, nil
	}
	names, err := List(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, n := range names[:max(len(names)-keep, 0)] {
		p := filepath.Join(dir, n)
		if err := os.Remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		return removed, durable.SyncDir(dir)
	}
	return removed, nil
}

// List names the backups in dir, oldest first (the names sort by time).
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, Prefix) && (strings.HasSuffix(n, ArchiveSuffix) || strings.HasSuffix(n, FileSuffix)) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Newest is the file a restore of from reads: from itself, or the newest
// backup in it when it is a directory (a *NoBackupsError if it holds
// none).
func Newest(from string) (string, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return from, nil
	}
	names, err := List(from)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", &NoBackupsError{Dir: from}
	}
	return filepath.Join(from, names[len(names)-1]), nil
}
