package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// primeWorktree is what prime adds in a git repository: the briefing's loop
// already names the tools, so only what the worktree changes.
const primeWorktree = `
## In this git repository: a worktree per task

Claim with task_claim worktree=true (shell: wsctl task claim --worktree), then edit,
build, test and commit only in the worktree.path it returns, never in the main
checkout. When it is committed, "wsctl work submit TASK": the merge queue lands it
and marks the task done; "wsctl work" says what came back and what to do.
`

func (a *app) primeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "prime",
		Short: "Print what an agent needs when it starts work (for a session-start hook)",
		Long: `prime prints, in about a thousand tokens, what an agent needs when it starts
work: what the workspace is, the loop (claim, lock, write with the fence,
done; heartbeat on long work), the MCP tools and wsctl commands for it, and
a live summary: tasks ready, what --as (or AGENTSPACE_ACTOR) holds, others
at work and recent decisions; in a git repository, to work each task in
its own worktree. 'wsctl setup claude' runs it at every session start.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, _ := a.actor()
			return a.with(ctx, func(ws *workspace.Workspace) error {
				if err := mcp.Prime(ctx, ws, a.stdout, mcp.PrimeOptions{Actor: actor}); err != nil {
					return err
				}
				if !inGitRepo(ctx, ".") {
					return nil
				}
				_, err := io.WriteString(a.stdout, primeWorktree)
				return err
			})
		}),
	}
}
