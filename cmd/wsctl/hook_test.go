package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

const hookPolicy = `
[roles.implementer]
artifacts_read  = ["**"]
artifacts_write = ["src/**"]
[actors]
root   = ["admin"]
claude = ["implementer"]
`

// hookJSON is a PreToolUse input as Claude Code sends it, for a tool on a
// file of the project at dir.
func hookJSON(dir, tool, file string) string {
	inputs := map[string]string{
		"Write":     `{"file_path":%q,"content":"package a\n"}`,
		"Edit":      `{"file_path":%q,"old_string":"a","new_string":"b","replace_all":false}`,
		"MultiEdit": `{"file_path":%q,"edits":[{"old_string":"a","new_string":"b"},{"old_string":"c","new_string":"d","replace_all":true}]}`,
		"Bash":      `{"command":"rm -rf %s","description":"clean"}`,
	}
	in := strings.Replace(inputs[tool], "%q", `"`+file+`"`, 1)
	in = strings.Replace(in, "%s", file, 1)
	return `{"session_id":"5e1f0c1a-0000-4000-8000-000000000001","transcript_path":"/home/u/.claude/projects/p/5e1f.jsonl",` +
		`"cwd":"` + dir + `","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":` + in + `}`
}

// TestSetupClaudeHookBlocksForbiddenEdits installs the hooks with setup,
// then runs the PreToolUse command from .claude/settings.json the way
// Claude Code does (sh -c, the input on stdin, CLAUDE_PROJECT_DIR set):
// exit 0 for what the actor may write, exit 2 with the reason on stderr
// for what it may not, and a non-blocking exit for what it cannot check.
func TestSetupClaudeHookBlocksForbiddenEdits(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(hookPolicy)})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	runSetup(t, dir, "claude", "--command", wsctlBinary(t))
	settings := readJSONFile(t, filepath.Join(dir, ".claude", "settings.json"))
	pre := settings["hooks"].(map[string]any)["PreToolUse"].([]any)
	require.Len(t, pre, 1)
	group := pre[0].(map[string]any)
	assert.Equal(t, "Edit|MultiEdit|Write", group["matcher"])
	command := group["hooks"].([]any)[0].(map[string]any)["command"].(string)
	assert.True(t, strings.HasSuffix(command, " hook pre-edit --as claude"), command)

	hook := func(input string, env ...string) (int, string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"AGENTSPACE_DSN=" + dsn, "CLAUDE_PROJECT_DIR=" + dir, "GORACE=atexit_sleep_ms=0"}, env...)...)
		cmd.Stdin = strings.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stderr.String()
	}
	for _, tool := range []string{"Write", "Edit", "MultiEdit"} {
		code, stderr := hook(hookJSON(dir, tool, filepath.Join(dir, "src", "a.go")))
		assert.Equal(t, 0, code, "%s src/a.go: %s", tool, stderr)
		code, stderr = hook(hookJSON(dir, tool, filepath.Join(dir, "docs", "a.md")))
		assert.Equal(t, 2, code, "%s docs/a.md: %s", tool, stderr)
		assert.Contains(t, stderr, `"claude" may not write "docs/a.md"`)
		assert.Contains(t, stderr, "no artifacts_write entry of roles implementer grants it")
	}
	// The policy file itself needs the admin right.
	code, stderr := hook(hookJSON(dir, "Edit", filepath.Join(dir, ".agentspace", "policy.toml")))
	assert.Equal(t, 2, code, stderr)
	// Relative paths are the project's; a file outside it is no artifact.
	code, _ = hook(hookJSON(dir, "Write", "src/b.go"))
	assert.Equal(t, 0, code)
	code, _ = hook(hookJSON(dir, "Write", "docs/b.md"))
	assert.Equal(t, 2, code)
	code, stderr = hook(hookJSON(dir, "Write", "/tmp/scratch.txt"))
	assert.Equal(t, 0, code, stderr)
	// Another tool passes; so does a matcher mistake sending one here.
	code, _ = hook(hookJSON(dir, "Bash", "docs"))
	assert.Equal(t, 0, code)
	// What it cannot check never blocks: exit 1, which Claude Code reports.
	code, stderr = hook(`{"tool_name":"Write",`)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "not the JSON object")
	code, _ = hook(hookJSON(dir, "Write", filepath.Join(dir, "docs", "a.md")), "AGENTSPACE_DSN=sqlite:"+filepath.Join(t.TempDir(), "none.db"))
	assert.Equal(t, 1, code, "no workspace there: reported, not blocking")
}

func TestHookPreEditNeedsAnActorButNeverBlocksForIt(t *testing.T) {
	dsn, _ := newMCPWorkspace(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--dsn", dsn, "hook", "pre-edit"}, strings.NewReader(hookJSON(t.TempDir(), "Write", "src/a.go")), &out, &errb, func(string) string { return "" })
	assert.Equal(t, exitError, code, errb.String())
	assert.Contains(t, errb.String(), "--as")
}

// TestSetupClaudeKeepsTheUsersSettings: setup adds its hooks to a
// settings file the user wrote, keeping every other setting and hook, and
// a second run changes nothing.
func TestSetupClaudeKeepsTheUsersSettings(t *testing.T) {
	dir := t.TempDir()
	user := `{
  "model": "opus",
  "permissions": {"allow": ["Bash(go test:*)"], "deny": ["Read(./.env)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/check-bash.sh"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}`
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".claude"), 0o750))
	path := filepath.Join(dir, ".claude", "settings.json")
	require.NoError(t, os.WriteFile(path, []byte(user), 0o600))
	runSetup(t, dir, "claude", "--actor", "impl-1")
	doc := readJSONFile(t, path)
	assert.Equal(t, "opus", doc["model"])
	assert.Equal(t, []any{"Bash(go test:*)"}, doc["permissions"].(map[string]any)["allow"])
	hooks := doc["hooks"].(map[string]any)
	stop := hooks["Stop"].([]any)
	require.Len(t, stop, 2, "the user's Stop hook and ours")
	assert.Equal(t, "notify-send done", stop[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"])
	assert.Equal(t, "wsctl hook stop --as impl-1", stop[1].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"])
	assert.NotContains(t, stop[1], "matcher", "a Stop hook takes no matcher")
	assert.Len(t, hooks["UserPromptSubmit"], 1)
	assert.Len(t, hooks["PostToolUse"], 1)
	pre := hooks["PreToolUse"].([]any)
	require.Len(t, pre, 2, "the user's Bash hook and ours")
	assert.Equal(t, "Bash", pre[0].(map[string]any)["matcher"])
	assert.Equal(t, "wsctl hook pre-edit --as impl-1", pre[1].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"])
	assert.Len(t, hooks["SessionStart"], 1)

	before, err := os.ReadFile(path)
	require.NoError(t, err)
	out := runSetup(t, dir, "claude", "--actor", "impl-1")
	assert.Contains(t, out, "unchanged  .claude/settings.json")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))

	// A settings file whose hooks are not an object is the user's to fix.
	require.NoError(t, os.WriteFile(path, []byte(`{"hooks": []}`), 0o600))
	_, stderr, code := wsctl(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), "setup", "claude", "--dir", dir)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `"hooks" is not an object`)
}
