package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/backup"
	"github.com/agentspace/agentspace/workspace"
)

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
			return a.with(ctx, func(ws *workspace.Workspace) error {
				r, err := backup.Write(ctx, ws, dir, backup.Options{Keep: keep, Archive: archive})
				if err != nil {
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
			path, err := backup.Newest(args[0])
			var none *backup.NoBackupsError
			switch {
			case errors.As(err, &none):
				return usageErrorf("%v", err)
			case err != nil:
				return inputFileError(args[0], err)
			}
			src, err := backup.Open(ctx, path)
			if pe, ok := err.(*fs.PathError); ok { //nolint:errorlint // only the file's own open, not a store's error within
				return inputFileError(path, pe)
			} else if err != nil {
				return err
			}
			defer src.Close()
			return a.withNew(ctx, func(ws *workspace.Workspace) error {
				rep, err := backup.Restore(ctx, ws, src, backup.RestoreOptions{WithTokens: withTokens})
				var nv *backup.NotVerifiedError
				if errors.As(err, &nv) {
					return &cliError{code: exitTampered, err: err}
				}
				if err != nil {
					return err
				}
				st, r := rep.Import, rep.Verified
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
