package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// artifactPinCmd and artifactUnpinCmd keep a version from retention
// (wsctl gc --keep-versions) and let it go again: Workspace.Pin.
func (a *app) artifactPinCmd() *cobra.Command {
	return a.pinCmd("pin", "Keep version V of an artifact from retention (gc --keep-versions) until unpinned")
}

func (a *app) artifactUnpinCmd() *cobra.Command {
	return a.pinCmd("unpin", "Let a pinned version go at the next gc --keep-versions that does not keep it")
}

func (a *app) pinCmd(verb, short string) *cobra.Command {
	var (
		version int64
		message string
	)
	cmd := &cobra.Command{
		Use:   verb + " NAME --version V",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if version < 1 {
				return usageErrorf("%s needs --version V (a version from 1)", verb)
			}
			w := workspace.Write{Actor: actor, Message: message}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				if verb == "unpin" {
					if err := ws.Unpin(ctx, w, args[0], version); err != nil {
						return err
					}
					if a.jsonOut {
						return a.printJSON(workspace.Subject{Kind: workspace.SubjectArtifact, Name: args[0]})
					}
					return nil
				}
				n, err := ws.Pin(ctx, w, args[0], version)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(n)
				}
				_, err = fmt.Fprintf(a.stdout, "pinned %s version %d\n", args[0], version)
				return err
			})
		}),
	}
	cmd.Flags().Int64Var(&version, "version", 0, "the version")
	cmd.Flags().StringVarP(&message, "message", "m", "", "why: kept in the event log")
	return cmd
}
