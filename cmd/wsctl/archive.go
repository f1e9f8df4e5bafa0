package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// progressEvery is how many records pass between progress lines on stderr.
const progressEvery = 5000

func (a *app) progress(verb string, quiet bool) workspace.ArchiveOptions {
	if quiet {
		return workspace.ArchiveOptions{}
	}
	return workspace.ArchiveOptions{
		ProgressEvery: progressEvery,
		Progress: func(s workspace.ArchiveStats) {
			fmt.Fprintf(a.stderr, "wsctl: %s: %d records (%d tasks, %d notes, %d artifact versions, %d events)\n",
				verb, s.Records(), s.Tasks, s.Notes, s.Versions, s.Events)
		},
	}
}

func (a *app) exportCmd() *cobra.Command {
	var (
		out   string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "export [-o FILE]",
		Short: "Write the whole workspace as an NDJSON archive (stdout or -o FILE)",
		Long: `Write the whole workspace (every task, note, artifact version with its
content, lease and event) as a versioned NDJSON archive, read from one
consistent snapshot. Import it into an empty store of any backend with
'wsctl import'; exporting that store again gives the same bytes.
Progress goes to stderr (--quiet: none). The archive itself is NDJSON; with
-o FILE, --json prints the record counts.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws workspace.Workspace) error {
				if out == "" || out == "-" {
					bw := bufio.NewWriter(a.stdout)
					if _, err := workspace.Export(ctx, ws, bw, a.progress("export", quiet)); err != nil {
						return err
					}
					return bw.Flush()
				}
				var st workspace.ArchiveStats
				err := writeAtomic(out, func(w io.Writer) error {
					var err error
					st, err = workspace.Export(ctx, ws, w, a.progress("export", quiet))
					return err
				})
				if err != nil || !a.jsonOut {
					return err
				}
				return a.printJSON(st)
			})
		}),
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to FILE (atomically) instead of stdout")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// writeAtomic writes path through a temporary file renamed into place, so
// a failed export never leaves a truncated archive under the name.
func writeAtomic(path string, fn func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := fn(bw); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	if err := bw.Flush(); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func (a *app) importCmd() *cobra.Command {
	var (
		in    string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "import [-i FILE]",
		Short: "Load an archive from 'wsctl export' into an empty store (stdin or -i FILE)",
		Long: `Load an archive written by 'wsctl export' into the workspace, keeping every
id, version, timestamp, lock token and event seq. The store must be new and
empty. Progress goes to stderr (--quiet: none).`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			var r io.Reader = a.stdin
			if in != "" && in != "-" {
				f, err := os.Open(in) // #nosec G304 -- the archive the user named with -i
				if err != nil {
					return inputFileError(in, err)
				}
				defer f.Close()
				r = f
			}
			return a.with(ctx, func(ws workspace.Workspace) error {
				st, err := workspace.Import(ctx, ws, r, a.progress("import", quiet))
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(st)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&in, "input", "i", "", "read from FILE instead of stdin")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}
