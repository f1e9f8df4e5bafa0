package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

func newTestApp() *app {
	var out bytes.Buffer
	return &app{stdout: &out, stderr: &out, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
}

// TestTopLevelIsTheWholeTree: the table rootFor picks a lone command from
// names every top-level command of the whole tree, each by the name its
// constructor gives it.
func TestTopLevelIsTheWholeTree(t *testing.T) {
	a := newTestApp()
	var whole []string
	for _, c := range a.rootCmd().Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		whole = append(whole, c.Name())
	}
	var table []string
	for name, mk := range a.topLevel() {
		require.Equal(t, name, mk().Name(), "topLevel[%q] builds another command", name)
		table = append(table, name)
	}
	slices.Sort(whole)
	slices.Sort(table)
	require.Equal(t, whole, table)
}

// TestLoneCommandIsTheSame: every command under a top-level one has the
// same usage (flags, the root's flags, subcommands) and the same argument
// check under a root that holds that top-level command alone as in the
// whole tree.
func TestLoneCommandIsTheSame(t *testing.T) {
	a := newTestApp()
	whole := a.rootCmd()
	for name := range a.topLevel() {
		lone := a.rootFor([]string{name})
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			path := strings.Fields(c.CommandPath())[1:]
			w, rest, err := whole.Find(path)
			require.NoError(t, err, c.CommandPath())
			require.Empty(t, rest, c.CommandPath())
			require.Equal(t, w.UsageString(), c.UsageString(), c.CommandPath())
			require.Equal(t, w.Long, c.Long, c.CommandPath())
			if c.Args != nil {
				// A wrong count is explained the same way.
				for _, args := range [][]string{nil, {"x", "y", "z", "w", "v", "u"}} {
					we, ce := w.Args(w, args), c.Args(c, args)
					require.Equal(t, we == nil, ce == nil, c.CommandPath())
					if we != nil {
						require.Equal(t, we.Error(), ce.Error(), c.CommandPath())
					}
				}
			}
			for _, sub := range c.Commands() {
				walk(sub)
			}
		}
		for _, c := range lone.Commands() {
			if c.Name() == name {
				walk(c)
			}
		}
	}
}

// TestRootForNamesAfterRootFlags: the root's flags may stand before the
// command's name; anything else gets the whole tree.
func TestRootForNamesAfterRootFlags(t *testing.T) {
	a := newTestApp()
	whole := len(a.rootCmd().Commands())
	for _, args := range [][]string{
		{"task", "claim"},
		{"--dsn", "sqlite:x.db", "task", "claim"},
		{"--dsn=sqlite:x.db", "--as", "me", "--json", "task"},
		{"--json=true", "--env", "dev", "--config", "c.toml", "version"},
	} {
		root := a.rootFor(args)
		names := []string{}
		for _, c := range root.Commands() {
			if c.Name() != "help" && c.Name() != "completion" {
				names = append(names, c.Name())
			}
		}
		want := "task"
		if args[len(args)-1] == "version" {
			want = "version"
		}
		require.Equal(t, []string{want}, names, "%q", args)
	}
	for _, args := range [][]string{
		nil, {"help", "task"}, {"completion", "bash"}, {"__complete", "task", ""},
		{"--version"}, {"-h"}, {"tsk"}, {"--dsn"}, {"--bogus", "task"}, {"--", "task"},
	} {
		require.Len(t, a.rootFor(args).Commands(), whole, "%q", args)
	}
}

// TestLoneRootRuns: a call through the lone root prints what the whole
// tree prints for the same arguments.
func TestLoneRootRuns(t *testing.T) {
	for _, args := range [][]string{
		{"version"},
		{"task", "--help"},
		{"task", "clam"},
		{"task", "get"},
		{"--json", "task", "add"},
	} {
		var lone, whole bytes.Buffer
		env := func(string) string { return "" }
		codeLone := run(context.Background(), args, strings.NewReader(""), &lone, &lone, env)
		a := &app{stdin: strings.NewReader(""), stdout: &whole, stderr: &whole, getenv: env}
		root := a.rootCmd()
		root.SetArgs(args)
		root.SetOut(&whole)
		root.SetErr(&whole)
		err := root.ExecuteContext(context.Background())
		if err != nil {
			code, msg := a.report(err)
			require.Equal(t, code, codeLone, "%q", args)
			if a.jsonOut {
				a.printProblem(err, code, msg)
			} else {
				whole.WriteString("wsctl: " + msg + "\n")
			}
		} else {
			require.Equal(t, exitOK, codeLone, "%q", args)
		}
		require.Equal(t, whole.String(), lone.String(), "%q", args)
	}
}
