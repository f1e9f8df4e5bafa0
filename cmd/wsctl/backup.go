package main

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

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

const (
	backupPrefix = "agentspace-"
	backupSuffix = ".ndjson"
	// fileBackupSuffix names a copy of a SQLite store's file.
	fileBackupSuffix = ".db"
)

// backupResult is what backup reports.
type backupResult struct {
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
	// Format is "archive" (wsctl export's) or "sqlite" (a copy of the file).
	Format string `json:"format"`
	// Counts are an archive's records; Verified is what the check of a
	// file copy read.
	Counts   *workspace.ArchiveStats `json:"counts,omitempty"`
	Verified *workspace.VerifyReport `json:"verified,omitempty"`
	HeadHash string                  `json:"head_hash"`
	Removed  []string                `json:"removed,omitempty"`
}

func (a *app) backupCmd() *cobra.Command {
	var (
		dir     string
		keep    int
		archive bool
	)
	cmd := &cobra.Command{
		Use:   "backup --to DIR [--keep N] [--archive]",
		Short: "Write a consistent, verified snapshot of the workspace to DIR, keeping the newest N",
		Long: `Write the whole workspace, as of one consistent snapshot, to DIR, and
verify it before it gets its name; then remove the oldest backups beyond
--keep. Restore one into an empty store with 'wsctl restore FILE'.

A SQLite store is copied with VACUUM INTO to DIR/agentspace-TIME.db
(writers go on meanwhile); the copy is opened read-only and must pass
PRAGMA integrity_check and the hash chain and content check of 'wsctl
verify'. Other stores, or any with --archive, are written as the archive of
'wsctl export' to DIR/agentspace-TIME.ndjson; the file is imported into a
scratch json store, whose chain and contents must verify and whose export
must equal the file byte for byte.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageErrorf("--to DIR is required")
			}
			if keep < 0 {
				return usageErrorf("--keep %d: want a count, at least 0 (0 keeps every backup)", keep)
			}
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				var r backupResult
				err := errors.ErrUnsupported
				if !archive {
					r, err = writeFileBackup(ctx, ws, dir)
				}
				if errors.Is(err, errors.ErrUnsupported) {
					r, err = writeBackup(ctx, ws, dir)
				}
				if err != nil {
					return err
				}
				if r.Removed, err = rotateBackups(dir, keep); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(r)
				}
				if r.Counts != nil {
					fmt.Fprintf(a.stdout, "%s: %d bytes, %d records, verified (head hash %s)\n", r.File, r.Bytes, r.Counts.Records(), r.HeadHash)
				} else {
					fmt.Fprintf(a.stdout, "%s: %d bytes, a copy of the SQLite file, integrity and %d links checked, verified (head hash %s)\n", r.File, r.Bytes, r.Verified.Events, r.HeadHash)
				}
				for _, f := range r.Removed {
					fmt.Fprintln(a.stdout, "removed", f)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&dir, "to", "", "the directory of backups")
	cmd.Flags().IntVar(&keep, "keep", 0, "keep the newest N backups in DIR, removing older ones (0: keep all)")
	cmd.Flags().BoolVar(&archive, "archive", false, "write the archive of 'wsctl export' even where the store's file can be copied")
	return cmd
}

// backupName is a new backup's file name: the names sort by time.
func backupName(suffix string) string {
	return backupPrefix + time.Now().UTC().Format("20060102T150405.000000Z") + suffix
}

// writeFileBackup copies the file of ws's store into dir, verified (see
// workspace.BackupFile), readable by its owner only, as the store is;
// errors.ErrUnsupported if the store has no file.
func writeFileBackup(ctx context.Context, ws *workspace.Workspace, dir string) (backupResult, error) {
	name := backupName(fileBackupSuffix)
	final := filepath.Join(dir, name)
	// VACUUM INTO creates its file with the default mode (0644 under the
	// usual umask) and will not write into one made beforehand: the copy
	// is written inside a directory of its own (0700, so nobody else can
	// open it meanwhile) and made 0600 before it gets its name.
	priv, err := os.MkdirTemp(dir, ".backup-*")
	if err != nil {
		return backupResult{}, err
	}
	defer os.RemoveAll(priv)
	tmp := filepath.Join(priv, name)
	v, err := ws.Backup(ctx, tmp)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return backupResult{}, err
		}
		return backupResult{}, fmt.Errorf("backup %s failed verification, not kept: %w", final, err)
	}
	// VACUUM INTO does not sync the file it writes.
	f, err := os.Open(tmp) // #nosec G304 -- the copy this command just wrote
	if err != nil {
		return backupResult{}, err
	}
	err = f.Chmod(0o600)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return backupResult{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return backupResult{}, err
	}
	if err := syncDir(dir); err != nil {
		return backupResult{}, err
	}
	return backupResult{File: final, Bytes: fi.Size(), Format: "sqlite", Verified: &v, HeadHash: v.HeadHash}, nil
}

// syncDir makes a rename into dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir) // #nosec G304 -- a directory this command writes in
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeBackup exports ws to a new file in dir and verifies it before
// giving it its final name.
func writeBackup(ctx context.Context, ws *workspace.Workspace, dir string) (backupResult, error) {
	name := backupName(backupSuffix)
	final := filepath.Join(dir, name)
	tmp := filepath.Join(dir, "."+name+".tmp")
	r := backupResult{Format: "archive", Counts: &workspace.ArchiveStats{}}
	err := writeAtomic(tmp, func(w io.Writer) error {
		var err error
		*r.Counts, err = ws.Export(ctx, w, workspace.ArchiveOptions{})
		return err
	})
	if err != nil {
		return r, err
	}
	defer os.Remove(tmp)
	data, err := os.ReadFile(tmp) // #nosec G304 -- the file this command just wrote
	if err != nil {
		return r, err
	}
	if r.HeadHash, err = verifyArchive(ctx, data); err != nil {
		return r, fmt.Errorf("backup %s failed verification, not kept: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return r, err
	}
	if err := syncDir(dir); err != nil {
		return r, err
	}
	r.File, r.Bytes = final, int64(len(data))
	return r, nil
}

// verifyArchive imports an archive into a scratch json store, verifies
// that store's chain and contents, and checks that its export is the
// archive byte for byte. It returns the chain's head hash.
func verifyArchive(ctx context.Context, data []byte) (string, error) {
	scratch, err := os.MkdirTemp("", "agentspace-verify-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	ws, err := workspace.Open(ctx, "json:"+filepath.Join(scratch, "ws"), workspace.Options{})
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

// rotateBackups removes the oldest backups in dir beyond the newest keep.
func rotateBackups(dir string, keep int) ([]string, error) {
	if keep == 0 {
		return nil, nil
	}
	names, err := backupNames(dir)
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
	return removed, nil
}

func (a *app) restoreCmd() *cobra.Command {
	var withTokens bool
	cmd := &cobra.Command{
		Use:   "restore FILE|DIR [--with-tokens]",
		Short: "Load a backup into the workspace's store, which must be empty, and verify it",
		Long: `Import a backup written by 'wsctl backup' (or 'wsctl export'), or the
newest backup in DIR, into the store the DSN names, which must be new or
empty: every record is validated and the event log's hash chain checked as
it is read, and the restored store is verified afterwards. Nothing is
written into a store that is not empty. A copy of a SQLite file (.db) is
restored into any backend: the copy is opened from a scratch copy of it
(the backup itself is never opened for writing) and its archive imported.

Token records (the server's credentials) are left out unless --with-tokens
is given: a backup, or a file made to look like one, grants nobody access
unless asked to. Events that come without their hash (archives of format
version 1 or 2) cannot be checked against the exporting store's chain: the
output says how many, and does not call them verified.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			path, err := backupFile(args[0])
			if err != nil {
				return err
			}
			f, err := os.Open(path) // #nosec G304 -- the backup the user named
			if err != nil {
				return inputFileError(path, err)
			}
			defer f.Close()
			var in io.Reader = f
			if isSQLiteFile(f) {
				pr, done, err := archiveOfFile(ctx, path)
				if err != nil {
					return err
				}
				defer done()
				in = pr
			}
			return a.withNew(ctx, func(ws *workspace.Workspace) error {
				st, err := ws.Import(ctx, in, workspace.ArchiveOptions{WithSealed: withTokens})
				if err != nil {
					return err
				}
				r, err := ws.Verify(ctx)
				if err != nil {
					return err
				}
				if !r.OK() {
					return &cliError{code: exitTampered, err: fmt.Errorf("restore: the restored store does not verify: %s", strings.Join(r.Problems, "; "))}
				}
				if a.jsonOut {
					return a.printJSON(struct {
						Counts   workspace.ImportReport `json:"counts"`
						HeadHash string                 `json:"head_hash"`
					}{st, r.HeadHash})
				}
				if st.Unchained == 0 {
					fmt.Fprintf(a.stdout, "restored %d records from %s, verified (head hash %s)\n", st.Records(), path, r.HeadHash)
				} else {
					fmt.Fprintf(a.stdout, "restored %d records from %s, not verified against its chain (head hash %s)\n", st.Records(), path, r.HeadHash)
				}
				for _, c := range importCaveats(st) {
					fmt.Fprintln(a.stdout, c)
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&withTokens, "with-tokens", false, "restore the token records too (credentials that act as their actors)")
	return cmd
}

// importCaveats says, one line each, what an import did not check or
// left out.
func importCaveats(st workspace.ImportReport) []string {
	var out []string
	if st.Unchained > 0 {
		out = append(out, fmt.Sprintf("%d of %d events came without their hash (an archive of format version 1 or 2, or events older than the exporting store's chain): nothing checked them against that store's log; this store chained them anew", st.Unchained, st.Events))
	}
	if st.SkippedSealed > 0 {
		out = append(out, fmt.Sprintf("left out %d token records (credentials): restore them with --with-tokens, or create new tokens", st.SkippedSealed))
	}
	return out
}

// isSQLiteFile reports whether f starts with SQLite's file header (and
// rewinds it).
func isSQLiteFile(f *os.File) bool {
	var head [16]byte
	n, _ := io.ReadFull(f, head[:])
	_, err := f.Seek(0, io.SeekStart)
	return err == nil && n == len(head) && string(head[:]) == "SQLite format 3\x00"
}

// archiveOfFile opens a scratch copy of the SQLite backup at path and
// returns a reader of its archive, written as it is read; done closes the
// store and removes the copy. The export's error, if any, reaches the
// reader (and so the import).
func archiveOfFile(ctx context.Context, path string) (io.Reader, func(), error) {
	scratch, err := os.MkdirTemp("", "agentspace-restore-*")
	if err != nil {
		return nil, nil, err
	}
	cp := filepath.Join(scratch, "ws.db")
	if err := copyFile(path, cp); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, nil, err
	}
	ws, err := workspace.Open(ctx, "sqlite:"+cp, workspace.Options{MustExist: true})
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, nil, fmt.Errorf("restore %s: %w", path, err)
	}
	pr, pw := io.Pipe()
	exported := make(chan struct{})
	go func() {
		defer close(exported)
		_, err := ws.Export(ctx, pw, workspace.ArchiveOptions{})
		pw.CloseWithError(err)
	}()
	done := func() {
		_ = pr.Close() // an import that stopped early ends the export
		<-exported
		_ = ws.Close()
		_ = os.RemoveAll(scratch)
	}
	return pr, done, nil
}

// copyFile copies the file at from to a new file to.
func copyFile(from, to string) error {
	in, err := os.Open(from) // #nosec G304 -- the backup the user named
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- a file in our own scratch directory
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// backupFile is the file restore reads: from, or the newest backup in it
// when it is a directory.
func backupFile(from string) (string, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return "", inputFileError(from, err)
	}
	if !fi.IsDir() {
		return from, nil
	}
	names, err := backupNames(from)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", usageErrorf("%s holds no backups (%s*%s or %s*%s)", from, backupPrefix, backupSuffix, backupPrefix, fileBackupSuffix)
	}
	return filepath.Join(from, names[len(names)-1]), nil
}

// backupNames are the backups in dir, oldest first (the names sort by time).
func backupNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, backupPrefix) && (strings.HasSuffix(n, backupSuffix) || strings.HasSuffix(n, fileBackupSuffix)) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
