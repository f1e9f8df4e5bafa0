package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
)

// The markers of the blocks setup writes into files people also edit:
// setup replaces what is between them and nothing else.
const (
	mdBegin   = "<!-- agentspace:begin (written by wsctl setup; edits inside are replaced) -->"
	mdEnd     = "<!-- agentspace:end -->"
	tomlBegin = "# agentspace:begin (written by wsctl setup; edits inside are replaced)"
	tomlEnd   = "# agentspace:end"
)

// agentBlock is the instruction block setup puts in AGENTS.md, CLAUDE.md
// or GEMINI.md: short, because the agent reads it every session.
const agentBlock = `## Coordination: agentspace

This project's agents share one agentspace workspace (tasks, versioned artifacts,
decisions, locks). Use its MCP tools (server "agentspace"), or wsctl from a shell:

1. task_claim to take the next ready task; task_update action=heartbeat on long work.
2. lock op=acquire on what you edit; write with artifact_write, passing if_version
   from your read and fence = your lock token. On "conflict", re-read and retry.
3. task_update action=done with a summary and the artifacts; release the lock.
4. Record decisions others must follow with note op=put kind=decision.

Run "wsctl prime" for the full briefing and what is going on now.`

// agentBlockGit is agentBlock for a project in a git repository: each task
// is worked in its own worktree, which the claim makes, and lands through
// the merge queue.
const agentBlockGit = `## Coordination: agentspace

This project's agents share one agentspace workspace (tasks, versioned artifacts,
decisions, locks). Use its MCP tools (server "agentspace"), or wsctl from a shell:

` + worktreeSteps + `
Run "wsctl prime" for the full briefing and what is going on now.`

// worktreeSteps is the loop in a git repository, for the setup block and
// wsctl prime.
const worktreeSteps = `1. task_claim with worktree=true (shell: wsctl task claim --worktree) takes the next
   ready task and makes its git worktree: edit, build, test and commit only in the
   worktree.path it returns, never in the main checkout. task_update action=heartbeat
   on long work.
2. lock op=acquire on shared artifacts you edit; write with artifact_write, passing
   if_version from your read and fence = your lock token. On "conflict", re-read, retry.
3. When it is committed, run "wsctl work submit TASK": the merge queue validates it,
   lands it and marks the task done. "wsctl work" says what came back and what to do.
4. Record decisions others must follow with note op=put kind=decision.
`

// inGitRepo reports whether dir is inside a git repository's work tree.
func inGitRepo(ctx context.Context, dir string) bool {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--is-inside-work-tree").Output() // #nosec G204 -- git with fixed arguments
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// setupTarget is one agent's project-local configuration.
type setupTarget struct {
	mcpFile  string // where its MCP servers are configured
	mdFile   string // the instructions file it reads
	hook     bool   // it runs a SessionStart hook (Claude Code)
	tomlConf bool   // mcpFile is Codex's TOML
}

var setupTargets = map[string]setupTarget{
	"claude": {mcpFile: ".mcp.json", mdFile: "CLAUDE.md", hook: true},
	"codex":  {mcpFile: ".codex/config.toml", mdFile: "AGENTS.md", tomlConf: true},
	"gemini": {mcpFile: ".gemini/settings.json", mdFile: "GEMINI.md"},
	"cursor": {mcpFile: ".cursor/mcp.json", mdFile: "AGENTS.md"},
}

func (a *app) setupCmd() *cobra.Command {
	var dir, name, command, actor string
	var dryRun, noInit, noCheck bool
	c := &cobra.Command{
		Use:   "setup claude|codex|gemini|cursor",
		Short: "Configure a coding agent in this project to use the workspace over MCP",
		Long: `setup writes the project-local configuration a coding agent reads, so that
it starts 'wsctl mcp' as an MCP server named agentspace:

  claude  .mcp.json, .claude/settings.json (a SessionStart hook running
          'wsctl prime', and a PreToolUse hook on Edit|MultiEdit|Write
          running 'wsctl hook pre-edit', which blocks an edit the
          workspace's policy forbids; the wake-up contract's
          UserPromptSubmit and PostToolUse hooks running 'wsctl hook
          inbox' and Stop hook running 'wsctl hook stop'), and a block
          in CLAUDE.md
  codex   .codex/config.toml ([mcp_servers.agentspace]; Codex reads it in
          trusted projects), and a block in AGENTS.md
  gemini  .gemini/settings.json (mcpServers), and a block in GEMINI.md
  cursor  .cursor/mcp.json, and a block in AGENTS.md

The server finds the workspace as wsctl does from --dir (agentspace.toml,
AGENTSPACE_DSN, else .agentspace/); setup never writes a DSN into a file.
When there is no workspace there, setup creates it as 'wsctl init' does
(--no-init: it refuses, naming the command to run). A workspace under
.agentspace/ inside a git repository is added to the repository's
.gitignore, so that 'git add -A' never commits it.

It ends by starting the MCP server as the agent will ('wsctl mcp' in
--dir) and printing what the agent will see: the number of tools, or why
the server does not start (exit 1), e.g. wsctl not on PATH.

It is idempotent: it changes only its own entries and marked blocks,
prints each file it created or updated (or left as it was), and writes
nothing outside --dir but the repository's .gitignore.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"claude", "codex", "gemini", "cursor"},
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			target, ok := setupTargets[args[0]]
			if !ok {
				return usageErrorf("unknown agent %q: one of claude, codex, gemini, cursor", args[0])
			}
			if actor == "" {
				actor = a.actorFlag
			}
			if actor == "" {
				actor = args[0]
			}
			if name == "" || strings.ContainsAny(name, "_ .\"'") {
				// Gemini CLI refuses underscores in server names; the others
				// take the name as a TOML or JSON key.
				return usageErrorf("--name %q: use letters, digits and '-'", name)
			}
			s := setup{root: dir, dryRun: dryRun, out: a.stdout}
			if err := a.setupWorkspace(ctx, s, noInit); err != nil {
				return err
			}
			server := map[string]any{"command": command, "args": []any{"mcp"}, "env": map[string]any{"AGENTSPACE_ACTOR": actor}}
			var err error
			switch {
			case target.tomlConf:
				err = s.tomlBlock(target.mcpFile, codexTOML(name, command, actor))
			case args[0] == "claude":
				server["type"] = "stdio"
				err = s.jsonKey(target.mcpFile, []string{"mcpServers", name}, server)
			default:
				err = s.jsonKey(target.mcpFile, []string{"mcpServers", name}, server)
			}
			if err != nil {
				return err
			}
			if target.hook {
				as := " --as " + shellWord(actor)
				if err := s.claudeHooks(".claude/settings.json", []claudeHook{
					{event: "SessionStart", matcher: "startup|resume|clear|compact", command: command + " prime" + as},
					// Refuses an edit the policy forbids before it happens.
					{event: "PreToolUse", matcher: strings.Join(editTools, "|"), command: command + " hook pre-edit" + as},
					// The wake-up contract (docs/agents.md): new messages in one
					// line, and no stop while an ack is owed.
					{event: "UserPromptSubmit", command: command + " hook inbox" + as},
					{event: "PostToolUse", matcher: "*", command: command + " hook inbox" + as},
					{event: "Stop", command: command + " hook stop" + as},
				}); err != nil {
					return err
				}
			}
			block := agentBlock
			if inGitRepo(ctx, dir) {
				block = agentBlockGit
			}
			if err := s.mdBlock(target.mdFile, block); err != nil {
				return err
			}
			if dryRun || noCheck {
				return nil
			}
			return checkAgent(ctx, s, command, actor)
		}),
	}
	c.Flags().StringVar(&dir, "dir", ".", "the project's root")
	c.Flags().StringVar(&name, "name", "agentspace", "the MCP server's name in the agent's configuration")
	c.Flags().StringVar(&command, "command", "wsctl", "how the agent starts wsctl (a name on its PATH or a path)")
	c.Flags().StringVar(&actor, "actor", "", "who the agent acts as (default: --as, else the agent's name)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, write nothing")
	c.Flags().BoolVar(&noInit, "no-init", false, "refuse, rather than create the workspace, when there is none")
	c.Flags().BoolVar(&noCheck, "no-check", false, "do not start the agent's MCP server to check it")
	return c
}

// shellWord quotes s for a hook's command line when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>()*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// codexTOML is Codex's table for the server, written by hand rather than
// by an encoder so that it never repeats an [mcp_servers] header the file
// has already.
func codexTOML(name, command, actor string) string {
	q := func(s string) string {
		b, _ := json.Marshal(s) // a JSON string is a TOML basic string
		return string(b)
	}
	return fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = [\"mcp\"]\nenv = { AGENTSPACE_ACTOR = %s }", name, q(command), q(actor))
}

// setup writes files under root, reporting each.
type setup struct {
	root   string
	dryRun bool
	out    interface{ Write([]byte) (int, error) }
}

func (s setup) path(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

func (s setup) read(rel string) ([]byte, bool, error) {
	b, err := os.ReadFile(s.path(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// write stores content at rel if it differs from old, and says what it did.
func (s setup) write(rel string, old []byte, existed bool, content []byte) error {
	verb := "created"
	switch {
	case existed && bytes.Equal(old, content):
		fmt.Fprintf(s.out, "unchanged  %s\n", rel)
		return nil
	case existed:
		verb = "updated"
	}
	if s.dryRun {
		verb = "would have " + verb
	} else {
		if err := os.MkdirAll(filepath.Dir(s.path(rel)), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(s.path(rel), content, 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.out, "%-10s %s\n", verb, rel)
	return nil
}

// readJSON reads a JSON object file, {} when it does not exist.
func (s setup) readJSON(rel string) (map[string]any, []byte, bool, error) {
	old, existed, err := s.read(rel)
	if err != nil {
		return nil, nil, false, err
	}
	doc := map[string]any{}
	if existed && len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, nil, false, usageErrorf("%s is not a JSON object (%v): fix it or move it away, then run setup again", rel, err)
		}
	}
	return doc, old, existed, nil
}

func (s setup) writeJSON(rel string, doc map[string]any, old []byte, existed bool) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return s.write(rel, old, existed, append(b, '\n'))
}

// jsonKey sets doc[path...] = value in a JSON file, keeping the rest.
func (s setup) jsonKey(rel string, path []string, value any) error {
	doc, old, existed, err := s.readJSON(rel)
	if err != nil {
		return err
	}
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
	return s.writeJSON(rel, doc, old, existed)
}

// claudeHook is one hook setup adds to Claude Code's settings.
type claudeHook struct {
	event, matcher, command string
}

// claudeHooks adds each hook to the settings file rel, unless a hook of
// its event runs its command already, keeping everything else the file
// holds (other hooks, permissions, the user's settings).
func (s setup) claudeHooks(rel string, add []claudeHook) error {
	doc, old, existed, err := s.readJSON(rel)
	if err != nil {
		return err
	}
	hooks, ok := doc["hooks"].(map[string]any)
	if !ok && doc["hooks"] != nil {
		return usageErrorf("%s: \"hooks\" is not an object: fix it, then run setup again", rel)
	}
	if hooks == nil {
		hooks = map[string]any{}
		doc["hooks"] = hooks
	}
	for _, h := range add {
		groups, ok := hooks[h.event].([]any)
		if !ok && hooks[h.event] != nil {
			return usageErrorf("%s: hooks.%s is not a list: fix it, then run setup again", rel, h.event)
		}
		if slices.ContainsFunc(groups, func(g any) bool {
			group, _ := g.(map[string]any)
			inner, _ := group["hooks"].([]any)
			return slices.ContainsFunc(inner, func(x any) bool {
				hm, _ := x.(map[string]any)
				return hm["command"] == h.command
			})
		}) {
			continue
		}
		group := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": h.command}}}
		if h.matcher != "" {
			// Stop and UserPromptSubmit take no matcher.
			group["matcher"] = h.matcher
		}
		hooks[h.event] = append(groups, group)
	}
	return s.writeJSON(rel, doc, old, existed)
}

// replaceBlock puts body between begin and end in text: where the markers
// are, or appended.
func replaceBlock(text, begin, end, body string) string {
	block := begin + "\n" + body + "\n" + end + "\n"
	if i := strings.Index(text, begin); i >= 0 {
		if j := strings.Index(text[i:], end); j >= 0 {
			rest := strings.TrimPrefix(text[i+j+len(end):], "\n")
			return text[:i] + block + rest
		}
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if text != "" {
		text += "\n"
	}
	return text + block
}

func (s setup) mdBlock(rel, body string) error {
	old, existed, err := s.read(rel)
	if err != nil {
		return err
	}
	return s.write(rel, old, existed, []byte(replaceBlock(string(old), mdBegin, mdEnd, body)))
}

// tomlBlock writes Codex's server table in a marked block. A table of the
// same name outside the block is the user's: setup leaves the file alone.
func (s setup) tomlBlock(rel, body string) error {
	old, existed, err := s.read(rel)
	if err != nil {
		return err
	}
	text := string(old)
	outside := text
	if i := strings.Index(text, tomlBegin); i >= 0 {
		if j := strings.Index(text[i:], tomlEnd); j >= 0 {
			outside = text[:i] + text[i+j+len(tomlEnd):]
		}
	}
	var doc map[string]any
	if _, err := toml.Decode(outside, &doc); err != nil {
		return usageErrorf("%s is not valid TOML (%v): fix it, then run setup again", rel, err)
	}
	var mine map[string]any
	if _, err := toml.Decode(body, &mine); err != nil {
		return err
	}
	servers, _ := doc["mcp_servers"].(map[string]any)
	for name := range mine["mcp_servers"].(map[string]any) {
		if _, ok := servers[name]; ok {
			fmt.Fprintf(s.out, "unchanged  %s (it configures mcp_servers.%s itself)\n", rel, name)
			return nil
		}
	}
	return s.write(rel, old, existed, []byte(replaceBlock(text, tomlBegin, tomlEnd, body)))
}
