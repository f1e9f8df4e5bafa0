package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// completionTimeout bounds how long a shell waits for candidates read from
// the workspace; AGENTSPACE_COMPLETION_TIMEOUT (a Go duration) changes it,
// for a slow store or a loaded machine.
func completionTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("AGENTSPACE_COMPLETION_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 2 * time.Second
}

// completer lists candidates for the word being completed, from ws.
type completer func(ctx context.Context, ws *workspace.Workspace, args []string, toComplete string) ([]string, error)

// addCompletions teaches `wsctl completion bash|zsh|fish|powershell`
// scripts the workspace's own names: artifact names, task ids (with their
// titles), note kinds and keys, and lock resources.
func (a *app) addCompletions(root *cobra.Command) {
	// on calls set with the command at path, unless the tree holds the
	// top-level command alone and this is another (see rootFor).
	top := a.topLevel()
	on := func(path string, set func(c *cobra.Command)) {
		words := strings.Fields(path)
		if _, ok := top[words[0]]; !ok {
			panic("wsctl: no command " + path + " to complete") // a typo in the table below
		}
		if c, _, err := root.Find(words[:1]); err != nil || c == root {
			return
		}
		c, _, err := root.Find(words)
		if err != nil || c == root {
			panic("wsctl: no command " + path + " to complete") // a typo in the table below
		}
		set(c)
	}
	validArgs := func(fn func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) func(c *cobra.Command) {
		return func(c *cobra.Command) { c.ValidArgsFunction = fn }
	}
	first := func(fn completer) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return a.complete(func(ctx context.Context, ws *workspace.Workspace, args []string, toComplete string) ([]string, error) {
			if len(args) > 0 {
				return nil, nil
			}
			return fn(ctx, ws, args, toComplete)
		})
	}
	for _, p := range []string{"artifact put", "artifact get", "artifact log", "artifact diff", "artifact rollback", "artifact rm", "artifact pin", "artifact unpin"} {
		on(p, validArgs(first(artifactNames)))
	}
	for _, p := range []string{"task heartbeat", "task done", "task fail", "task release", "task show"} {
		on(p, validArgs(first(taskIDs)))
	}
	for _, p := range []string{"note get", "note rm", "note put", "note ls"} {
		on(p, validArgs(a.complete(noteKindsAndKeys)))
	}
	for _, p := range []string{"lock acquire", "lock renew", "lock release"} {
		on(p, validArgs(first(lockResources)))
	}
	flags := []struct{ cmd, flag string }{
		{"task add", "depends-on"}, {"task add", "parent"}, {"task claim", "parent"}, {"task ls", "parent"},
		{"artifact put", "task"}, {"artifact ls", "task"},
	}
	for _, f := range flags {
		on(f.cmd, func(c *cobra.Command) {
			_ = c.RegisterFlagCompletionFunc(f.flag, a.complete(taskIDs)) // only fails for an unknown or doubly registered flag
		})
	}
	on("events", func(c *cobra.Command) {
		_ = c.RegisterFlagCompletionFunc("type", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			var out []string
			for _, t := range eventTypes {
				if strings.HasPrefix(t, toComplete) {
					out = append(out, t)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		})
	})
}

// complete adapts fn to cobra: it opens the existing workspace (never
// creating one), and on any failure offers nothing rather than an error.
func (a *app) complete(fn completer) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout())
		defer cancel()
		var out []string
		err := a.with(ctx, func(ws *workspace.Workspace) error {
			var err error
			out, err = fn(ctx, ws, args, toComplete)
			return err
		})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func artifactNames(ctx context.Context, ws *workspace.Workspace, _ []string, toComplete string) ([]string, error) {
	page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: toComplete, Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(page.Artifacts))
	for _, x := range page.Artifacts {
		out = append(out, x.Name)
	}
	return out, nil
}

// taskIDs offers the ids that start with what was typed, each with its
// title and status as the description shells show.
func taskIDs(ctx context.Context, ws *workspace.Workspace, _ []string, toComplete string) ([]string, error) {
	prefix := strings.ToLower(toComplete)
	var out []string
	f := workspace.TaskFilter{Limit: 1000}
	for {
		page, err := ws.Tasks().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			if strings.HasPrefix(t.ID, prefix) {
				out = append(out, t.ID+"\t"+string(t.Status)+": "+oneLine(t.Title))
			}
		}
		if page.Next == "" {
			return out, nil
		}
		f.After = page.Next
	}
}

// noteKindsAndKeys offers the kinds for the first argument and that
// kind's keys for the second.
func noteKindsAndKeys(ctx context.Context, ws *workspace.Workspace, args []string, toComplete string) ([]string, error) {
	if len(args) > 1 {
		return nil, nil
	}
	var f workspace.NoteFilter
	if len(args) == 1 {
		f.Kind = args[0]
	}
	seen := map[string]bool{}
	var out []string
	for {
		f.Limit = 1000
		page, err := ws.Notes().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Notes {
			word := n.Kind
			if len(args) == 1 {
				word = n.Key
			}
			if strings.HasPrefix(word, toComplete) && !seen[word] {
				seen[word] = true
				out = append(out, word)
			}
		}
		if page.Next == "" {
			return out, nil
		}
		f.After = page.Next
	}
}

func lockResources(ctx context.Context, ws *workspace.Workspace, _ []string, toComplete string) ([]string, error) {
	ls, err := ws.Locks().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l.Resource, toComplete) {
			out = append(out, l.Resource+"\t"+l.Owner)
		}
	}
	return out, nil
}
