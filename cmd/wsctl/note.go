package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

func (a *app) noteCmd() *cobra.Command {
	return group("note", "Shared context (decisions, constraints, glossary): put, get, ls, rm",
		a.notePutCmd(),
		a.noteGetCmd(),
		a.noteLsCmd(),
		a.noteRmCmd(),
	)
}

func (a *app) notePutCmd() *cobra.Command {
	var (
		wf       writeFlags
		title    string
		body     string
		bodyFile string
	)
	cmd := &cobra.Command{
		Use:   "put KIND KEY --title T (--body B | --body-file F)",
		Short: "Create or update a note; prints its new version",
		Args:  cobra.ExactArgs(2),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if bodyFile != "" {
				if cmd.Flags().Changed("body") {
					return usageErrorf("--body and --body-file exclude each other")
				}
				b, err := a.readInput(bodyFile)
				if err != nil {
					return err
				}
				body = string(b)
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				n, err := ws.Notes().Put(ctx, wf.write(actor), workspace.NotePut{Kind: args[0], Key: args[1], Title: title, Body: body})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(n)
				}
				_, err = fmt.Fprintln(a.stdout, n.Version)
				return err
			})
		}),
	}
	wf.add(cmd)
	cmd.Flags().StringVar(&title, "title", "", "one-line title")
	cmd.Flags().StringVar(&body, "body", "", "the note's text")
	cmd.Flags().StringVar(&bodyFile, "body-file", "", "read the body from FILE (- for stdin)")
	return cmd
}

func (a *app) noteGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get KIND KEY",
		Short: "Print a note's body (--json: the whole note)",
		Args:  cobra.ExactArgs(2),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				n, err := ws.Notes().Get(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(n)
				}
				body := n.Body
				if body != "" && !strings.HasSuffix(body, "\n") {
					body += "\n"
				}
				_, err = fmt.Fprint(a.stdout, body)
				return err
			})
		}),
	}
}

func (a *app) noteLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls [KIND]",
		Short: "List notes, by kind then key",
		Args:  cobra.MaximumNArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			var f workspace.NoteFilter
			if len(args) == 1 {
				f.Kind = args[0]
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				all := []workspace.Note{}
				for {
					f.Limit = 1000
					page, err := ws.Notes().List(ctx, f)
					if err != nil {
						return err
					}
					all = append(all, page.Notes...)
					if page.Next == "" {
						break
					}
					f.After = page.Next
				}
				if a.jsonOut {
					return printList(a, all)
				}
				tw := a.table()
				fmt.Fprintln(tw, "KIND\tKEY\tVERSION\tUPDATED\tBY\tTITLE")
				for _, n := range all {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", n.Kind, n.Key, n.Version, stamp(n.UpdatedAt), n.UpdatedBy, orDash(n.Title))
				}
				return tw.Flush()
			})
		}),
	}
}

func (a *app) noteRmCmd() *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "rm KIND KEY",
		Short: "Delete a note",
		Args:  cobra.ExactArgs(2),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				if err := ws.Notes().Delete(ctx, wf.write(actor), args[0], args[1]); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(workspace.Subject{Kind: workspace.SubjectNote, ID: args[0] + "/" + args[1], Name: args[1]})
				}
				return nil
			})
		}),
	}
	wf.add(cmd)
	return cmd
}
