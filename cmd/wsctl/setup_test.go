package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func runSetup(t *testing.T, dir string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"setup", "--no-check", "--dir", dir}, args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
	require.Equal(t, 0, code, errb.String())
	return out.String()
}

func readJSONFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestSetupWritesEachAgentsConfigAndIsIdempotent(t *testing.T) {
	for _, agent := range []string{"claude", "codex", "gemini", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			dir := t.TempDir()
			first := runSetup(t, dir, agent)
			assert.NotContains(t, first, "unchanged")
			assert.Contains(t, first, "created")
			again := runSetup(t, dir, agent)
			assert.NotContains(t, again, "created")
			assert.NotContains(t, again, "updated")
			assert.Equal(t, strings.Count(first, "\n"), strings.Count(again, "unchanged"), "every file reported: %s", again)

			server := func(doc map[string]any) map[string]any {
				return doc["mcpServers"].(map[string]any)["agentspace"].(map[string]any)
			}
			switch agent {
			case "claude":
				s := server(readJSONFile(t, filepath.Join(dir, ".mcp.json")))
				assert.Equal(t, "stdio", s["type"])
				assert.Equal(t, "wsctl", s["command"])
				assert.Equal(t, []any{"mcp"}, s["args"])
				assert.Equal(t, "claude", s["env"].(map[string]any)["AGENTSPACE_ACTOR"])
				hooks := readJSONFile(t, filepath.Join(dir, ".claude", "settings.json"))["hooks"].(map[string]any)["SessionStart"].([]any)
				require.Len(t, hooks, 1)
				cmd := hooks[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"]
				assert.Equal(t, "wsctl prime --as claude", cmd)
				pre := readJSONFile(t, filepath.Join(dir, ".claude", "settings.json"))["hooks"].(map[string]any)["PreToolUse"].([]any)
				require.Len(t, pre, 1)
				assert.Equal(t, "Edit|MultiEdit|Write", pre[0].(map[string]any)["matcher"])
				assert.Equal(t, "wsctl hook pre-edit --as claude", pre[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"])
				assert.FileExists(t, filepath.Join(dir, "CLAUDE.md"))
			case "codex":
				var doc map[string]any
				_, err := toml.DecodeFile(filepath.Join(dir, ".codex", "config.toml"), &doc)
				require.NoError(t, err)
				s := doc["mcp_servers"].(map[string]any)["agentspace"].(map[string]any)
				assert.Equal(t, "wsctl", s["command"])
				assert.Equal(t, "codex", s["env"].(map[string]any)["AGENTSPACE_ACTOR"])
				assert.FileExists(t, filepath.Join(dir, "AGENTS.md"))
			case "gemini":
				assert.Equal(t, "wsctl", server(readJSONFile(t, filepath.Join(dir, ".gemini", "settings.json")))["command"])
				assert.FileExists(t, filepath.Join(dir, "GEMINI.md"))
			case "cursor":
				assert.Equal(t, "wsctl", server(readJSONFile(t, filepath.Join(dir, ".cursor", "mcp.json")))["command"])
				assert.FileExists(t, filepath.Join(dir, "AGENTS.md"))
			}
		})
	}
}

func TestSetupKeepsWhatPeopleWrote(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o600))
	}
	write("AGENTS.md", "# Our rules\n\nBe kind.\n")
	write(".cursor/mcp.json", `{"mcpServers":{"github":{"command":"gh-mcp"}},"other":1}`)
	write(".codex/config.toml", "model = \"o4\"\n\n[mcp_servers.github]\ncommand = \"gh-mcp\"\n")
	runSetup(t, dir, "cursor")
	runSetup(t, dir, "codex", "--actor", "codex-1")

	md, err := os.ReadFile(filepath.Join(dir, "AGENTS.md"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(md), "# Our rules\n\nBe kind.\n"))
	assert.Equal(t, 1, strings.Count(string(md), mdBegin), "one block, however often setup runs")

	cur := readJSONFile(t, filepath.Join(dir, ".cursor", "mcp.json"))
	assert.EqualValues(t, 1, cur["other"])
	assert.Contains(t, cur["mcpServers"], "github")
	assert.Contains(t, cur["mcpServers"], "agentspace")

	var doc map[string]any
	_, err = toml.DecodeFile(filepath.Join(dir, ".codex", "config.toml"), &doc)
	require.NoError(t, err)
	assert.Equal(t, "o4", doc["model"])
	servers := doc["mcp_servers"].(map[string]any)
	assert.Contains(t, servers, "github")
	assert.Equal(t, "codex-1", servers["agentspace"].(map[string]any)["env"].(map[string]any)["AGENTSPACE_ACTOR"])

	// Edits inside the block are replaced; the rest stays.
	write("AGENTS.md", strings.Replace(string(md), "task_claim", "EDITED", 1)+"\nAfter.\n")
	out := runSetup(t, dir, "cursor")
	assert.Contains(t, out, "updated    AGENTS.md")
	md, err = os.ReadFile(filepath.Join(dir, "AGENTS.md"))
	require.NoError(t, err)
	assert.NotContains(t, string(md), "EDITED")
	assert.Contains(t, string(md), "After.")
}

func TestSetupDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	out := runSetup(t, dir, "claude", "--dry-run")
	assert.Contains(t, out, "would have created .mcp.json")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestSetupRefusesUnknownAgentsAndBadNames(t *testing.T) {
	_, _, code := wsctl(t, "sqlite:unused.db", "setup", "vim", "--dir", t.TempDir())
	assert.Equal(t, exitUsage, code)
	_, _, code = wsctl(t, "sqlite:unused.db", "setup", "gemini", "--name", "agent_space", "--dir", t.TempDir())
	assert.Equal(t, exitUsage, code)
}

func TestPrimeBriefsTheAgentWithALiveSummary(t *testing.T) {
	dsn, ws := newMCPWorkspace(t)
	ctx := context.Background()
	_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "boss"}, workspace.NewTask{Title: "ready one", Priority: 3})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "boss"}, workspace.NewTask{Title: "mine"})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "claude"})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:go.mod", Owner: "claude", TTL: 60e9})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "boss"}, workspace.NotePut{Kind: "decision", Key: "db", Title: "Use Postgres"})
	require.NoError(t, err)

	out, stderr, code := wsctl(t, dsn, "prime", "--as", "claude")
	require.Equal(t, 0, code, stderr)
	t.Logf("prime: %d bytes", len(out))
	assert.Less(t, len(out), 8000, "about 1-2k tokens at most")
	for _, want := range []string{"task_claim", "fence", "heartbeat", "wsctl task claim", "You act as claude",
		"1 pending, 1 in progress", "ready one", "Your claimed tasks", "file:go.mod", "db: Use Postgres"} {
		assert.Contains(t, out, want)
	}
}

// TestSetupTellsAgentsInAGitRepositoryToWorkInTheirWorktree: in a git
// repository the block setup writes has the agent claim with its worktree
// and work only there; outside one it does not mention worktrees.
func TestSetupTellsAgentsInAGitRepositoryToWorkInTheirWorktree(t *testing.T) {
	plain, repo := t.TempDir(), t.TempDir()
	gitIn(t, "", "init", "-q", "-b", "main", repo)
	runSetup(t, plain, "claude")
	runSetup(t, repo, "claude")
	b, err := os.ReadFile(filepath.Join(repo, "CLAUDE.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "task_claim with worktree=true")
	assert.Contains(t, string(b), "only in the\n   worktree.path it returns")
	assert.Contains(t, string(b), `"wsctl work submit TASK"`)
	b, err = os.ReadFile(filepath.Join(plain, "CLAUDE.md"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "worktree")
}
