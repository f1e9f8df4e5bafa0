package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// exitTampered is verify's exit code when the log or a content is broken.
const exitTampered = 9

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the event log's hash chain and every artifact version's content hash",
		Long: `Recompute the event log's hash chain from its floor to its head, and the
SHA-256 of every stored artifact version, from one consistent snapshot.
An event edited, removed or reordered behind the library's back breaks
the chain: verify names the first seq whose link fails and exits 9.
Keep the printed head hash elsewhere: a later verify that reaches it
proves that nothing up to it was rewritten (docs/retention.md).`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				r, err := ws.Verify(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					if err := a.printJSON(r); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "events %d-%d: %d links checked", r.Floor, r.Head, r.Events)
					if r.Unchained > 0 {
						fmt.Fprintf(a.stdout, " (%d older events carry no hash)", r.Unchained)
					}
					fmt.Fprintf(a.stdout, "\nartifact versions: %d contents checked\nhead hash: %s\n", r.Versions, r.HeadHash)
					for _, p := range r.Problems {
						fmt.Fprintln(a.stdout, "BROKEN:", p)
					}
				}
				if r.OK() {
					return nil
				}
				msg := fmt.Sprintf("verify: %d problems", len(r.Problems))
				if r.BrokenSeq > 0 {
					msg = fmt.Sprintf("verify: the event log's chain breaks at seq %d", r.BrokenSeq)
				}
				return &cliError{code: exitTampered, err: errors.New(msg)}
			})
		}),
	}
}
