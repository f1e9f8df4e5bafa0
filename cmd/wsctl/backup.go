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
)

// backupResult is what backup reports.
type backupResult struct {
	File     string                 `json:"file"`
	Bytes    int64                  `json:"bytes"`
	Counts   workspace.ArchiveStats `json:"counts"`
	HeadHash string                 `json:"head_hash"`
	Removed  []string               `json:"removed,omitempty"`
}

func (a *app) backupCmd() *cobra.Command {
	var (
		dir  string
		keep int
	)
	cmd := &cobra.Command{
		Use:   "backup --to DIR [--keep N]",
		Short: "Write a consistent, verified snapshot of the workspace to DIR, keeping the newest N",
		Long: `Write the whole workspace, read from one consistent snapshot, to
DIR/agentspace-TIME.ndjson (the archive format of 'wsctl export', with the
event log's hash chain), then verify it: the file is imported into a
scratch json store, whose chain and contents must verify and whose export
must equal the file byte for byte. Only then does the backup get its name,
and the oldest backups beyond --keep are removed. Restore one into an
empty store with 'wsctl restore FILE'.`,
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
			return a.with(ctx, func(ws workspace.Workspace) error {
				r, err := writeBackup(ctx, ws, dir)
				if err != nil {
					return err
				}
				if r.Removed, err = rotateBackups(dir, keep); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(r)
				}
				fmt.Fprintf(a.stdout, "%s: %d bytes, %d records, verified (head hash %s)\n", r.File, r.Bytes, r.Counts.Records(), r.HeadHash)
				for _, f := range r.Removed {
					fmt.Fprintln(a.stdout, "removed", f)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&dir, "to", "", "the directory of backups")
	cmd.Flags().IntVar(&keep, "keep", 0, "keep the newest N backups in DIR, removing older ones (0: keep all)")
	return cmd
}

// writeBackup exports ws to a new file in dir and verifies it before
// giving it its final name.
func writeBackup(ctx context.Context, ws workspace.Workspace, dir string) (backupResult, error) {
	name := backupPrefix + time.Now().UTC().Format("20060102T150405.000000Z") + backupSuffix
	final := filepath.Join(dir, name)
	tmp := filepath.Join(dir, "."+name+".tmp")
	var r backupResult
	err := writeAtomic(tmp, func(w io.Writer) error {
		var err error
		r.Counts, err = workspace.Export(ctx, ws, w, workspace.ArchiveOptions{})
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
	if _, err := workspace.Import(ctx, ws, bytes.NewReader(data), workspace.ArchiveOptions{}); err != nil {
		return "", err
	}
	r, err := workspace.Verify(ctx, ws)
	if err != nil {
		return "", err
	}
	if !r.OK() {
		return "", fmt.Errorf("restored copy does not verify: %s", strings.Join(r.Problems, "; "))
	}
	var again bytes.Buffer
	if _, err := workspace.Export(ctx, ws, &again, workspace.ArchiveOptions{}); err != nil {
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
	return &cobra.Command{
		Use:   "restore FILE|DIR",
		Short: "Load a backup into the workspace's store, which must be empty, and verify it",
		Long: `Import a backup written by 'wsctl backup' (or 'wsctl export'), or the
newest backup in DIR, into the store the DSN names, which must be new or
empty: every record is
validated and the event log's hash chain checked as it is read, and the
restored store is verified afterwards. Nothing is written into a store
that is not empty.`,
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
			return a.withNew(ctx, func(ws workspace.Workspace) error {
				st, err := workspace.Import(ctx, ws, f, workspace.ArchiveOptions{})
				if err != nil {
					return err
				}
				r, err := workspace.Verify(ctx, ws)
				if err != nil {
					return err
				}
				if !r.OK() {
					return &cliError{code: exitTampered, err: fmt.Errorf("restore: the restored store does not verify: %s", strings.Join(r.Problems, "; "))}
				}
				if a.jsonOut {
					return a.printJSON(struct {
						Counts   workspace.ArchiveStats `json:"counts"`
						HeadHash string                 `json:"head_hash"`
					}{st, r.HeadHash})
				}
				fmt.Fprintf(a.stdout, "restored %d records from %s, verified (head hash %s)\n", st.Records(), path, r.HeadHash)
				return nil
			})
		}),
	}
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
		return "", usageErrorf("%s holds no backups (%s*%s)", from, backupPrefix, backupSuffix)
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
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, backupPrefix) && strings.HasSuffix(n, backupSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
