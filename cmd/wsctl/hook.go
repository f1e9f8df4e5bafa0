package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// Claude Code's hook protocol (PreToolUse): the hook reads one JSON object
// on stdin naming the tool and its input; exit 0 lets the call run, exit 2
// blocks it and shows stderr to the model, and any other exit is an error
// the user sees while the call runs anyway.
const (
	hookAllow = 0
	hookBlock = 2
)

// editTools are the tools whose file the pre-edit hook checks, and the
// matcher setup writes for them.
var editTools = []string{"Edit", "MultiEdit", "Write"}

// hookInput is the part of a PreToolUse hook's input the hook reads.
type hookInput struct {
	HookEventName string `json:"hook_event_name"`
	ToolName      string `json:"tool_name"`
	Cwd           string `json:"cwd"`
	ToolInput     struct {
		FilePath string `json:"file_path"`
	} `json:"tool_input"`
}

// maxHookInput bounds what the hook reads: a Write's input holds the
// file's whole content.
const maxHookInput = 64 << 20

func (a *app) hookCmd() *cobra.Command {
	return group("hook", "Hooks for coding agents (Claude Code): pre-edit, stop, inbox",
		a.hookPreEditCmd(), a.hookStopCmd(), a.hookInboxCmd(),
	)
}

func (a *app) hookPreEditCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pre-edit",
		Short: "A Claude Code PreToolUse hook: exit 2 (blocking, with the reason) if you (--as) may not write the file",
		Long: `pre-edit is a PreToolUse hook for Claude Code's Edit, MultiEdit and Write
tools ('wsctl setup claude' installs it). It reads the hook's JSON on stdin,
takes tool_input.file_path relative to the project's root
($CLAUDE_PROJECT_DIR, else the input's cwd), and answers as 'wsctl check
write' does: exit 0 lets the edit run; exit 2 blocks it, and Claude Code
shows the reason (on stderr) to the model. A file outside the project is no
artifact and is let through; another tool is let through. An error (no
workspace, input it cannot read) exits 1, which Claude Code reports
without blocking the edit. The engine checks the write again when it
reaches the workspace.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			err := a.preEdit(ctx)
			var b blocked
			switch {
			case errors.As(err, &b):
				return &cliError{code: hookBlock, err: b.err}
			case err != nil:
				// Only a refusal blocks the edit: every other failure (a
				// usage error too, which is otherwise exit 2) reports.
				return &cliError{code: exitError, err: err}
			}
			return nil
		}),
	}
}

// blocked is the pre-edit hook's refusal.
type blocked struct{ err error }

func (b blocked) Error() string { return b.err.Error() }

// preEdit is the pre-edit hook's body: nil to allow, blocked to block,
// any other error to report.
func (a *app) preEdit(ctx context.Context) error {
	actor, err := a.actor()
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(a.stdin, maxHookInput+1))
	if err != nil {
		return err
	}
	if len(raw) > maxHookInput {
		return fmt.Errorf("the hook's input is over %d bytes", maxHookInput)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("the hook's input is not the JSON object Claude Code sends: %w", err)
	}
	if !slices.Contains(editTools, in.ToolName) {
		return nil
	}
	if in.ToolInput.FilePath == "" {
		return fmt.Errorf("the %s call's input has no file_path", in.ToolName)
	}
	root := a.getenv("CLAUDE_PROJECT_DIR")
	if root == "" {
		root = in.Cwd
	}
	name, inside, err := projectPath(root, in.ToolInput.FilePath)
	if err != nil || !inside {
		return err
	}
	return a.with(ctx, func(ws *workspace.Workspace) error {
		c, err := ws.WriteCheck(ctx)
		if err != nil {
			return err
		}
		err = c.Check(workspace.Principal{Actor: actor}, name, false)
		var fe *workspace.ForbiddenError
		if !errors.As(err, &fe) {
			return err
		}
		return blocked{fmt.Errorf("the workspace's policy forbids this edit: %q may not write %q: %s. Leave the file as it is; if the change is needed, say so (a note, or your task's result) for an actor who may make it",
			actor, name, fe.Reason)}
	})
}

// projectPath turns a file path from a hook into the artifact name it
// stands for under root (the project's root; "" for the working
// directory). inside is false for a file outside root.
func projectPath(root, path string) (name string, inside bool, err error) {
	if root == "" {
		root = "."
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return "", false, err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	rel, err := filepath.Rel(root, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false, nil
	}
	name = filepath.ToSlash(rel)
	if err := workspace.ValidateName(name); err != nil {
		return "", false, err
	}
	return name, true, nil
}
