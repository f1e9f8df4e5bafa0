package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/internal/durable"
	"github.com/agentspace/agentspace/workspace"
)

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
On a terminal, a progress bar with the rate and ETA goes to stderr
(--quiet: none); piped, nothing does. The archive itself is NDJSON; with
-o FILE, --json prints the record counts.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				var bar *progress
				if !quiet && isTerminal(a.stderr) {
					size, err := exportSize(ctx, ws)
					if err != nil {
						return err
					}
					bar = a.newProgress("export", size, false, quiet)
				}
				if out == "" || out == "-" {
					bw := bufio.NewWriter(a.stdout)
					_, err := ws.Export(ctx, bw, bar.records())
					if err == nil {
						err = bw.Flush()
					}
					bar.done(err)
					return err
				}
				var st workspace.ArchiveStats
				err := writeAtomic(out, func(w io.Writer) error {
					var err error
					st, err = ws.Export(ctx, w, bar.records())
					return err
				})
				bar.done(err)
				if err != nil || !a.jsonOut {
					return err
				}
				return a.printJSON(st)
			})
		}),
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to FILE (atomically) instead of stdout")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar on a terminal")
	return cmd
}

// writeAtomic writes path through a temporary file renamed into place, so
// a failed export never leaves a truncated archive under the name; the
// file and its directory are synced.
func writeAtomic(path string, fn func(w io.Writer) error) error {
	return durable.WriteFile(path, fn)
}

func (a *app) importCmd() *cobra.Command {
	var (
		in         string
		quiet      bool
		withTokens bool
	)
	cmd := &cobra.Command{
		Use:   "import [-i FILE] [--with-tokens]",
		Short: "Load an archive from 'wsctl export' into an empty store (stdin or -i FILE)",
		Long: `Load an archive written by 'wsctl export' into the workspace, keeping every
id, version, timestamp, lock token and event seq. The store must be new and
empty. On a terminal, a progress bar with the rate and ETA goes to stderr
(--quiet: none); piped, nothing does.

Token records (the server's credentials) are left out unless --with-tokens
is given; stderr says how many were, and how many events came without the
hash that would check them against the exporting store's chain.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			var r io.Reader = a.stdin
			if in == "" || in == "-" {
				if err := a.checkStdinPiped("pipe the archive in (wsctl import < team.ndjson) or name it with -i FILE"); err != nil {
					return err
				}
			}
			if in != "" && in != "-" {
				f, err := os.Open(in) // #nosec G304 -- the archive the user named with -i
				if err != nil {
					return inputFileError(in, err)
				}
				defer f.Close()
				r = f
			}
			return a.withNew(ctx, func(ws *workspace.Workspace) error {
				// The bar counts bytes: the archive's size is known up
				// front (for a file), its record count is not.
				bar := a.newProgress("import", inputSize(r), true, quiet)
				st, err := ws.Import(ctx, bar.reader(r), workspace.ArchiveOptions{WithSealed: withTokens})
				bar.done(err)
				if err != nil {
					return err
				}
				for _, c := range importCaveats(st) {
					fmt.Fprintln(a.stderr, c)
				}
				if a.jsonOut {
					return a.printJSON(st)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&in, "input", "i", "", "read from FILE instead of stdin")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar on a terminal")
	cmd.Flags().BoolVar(&withTokens, "with-tokens", false, "import the token records too (credentials that act as their actors)")
	return cmd
}
