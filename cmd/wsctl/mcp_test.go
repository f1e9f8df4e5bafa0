package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/workspace"
)

// mcpEnv is the environment of a wsctl mcp process: no AGENTSPACE_ from
// the test's own, and no race-detector pause at exit.
func mcpEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTSPACE_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "GORACE=atexit_sleep_ms=0"), extra...)
}

func newMCPWorkspace(t testing.TB) (string, *workspace.Workspace) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return dsn, ws
}

func TestMCPCommandServesToolsOverStdio(t *testing.T) {
	dsn, ws := newMCPWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "boss"}, workspace.NewTask{Title: "write it"})
	require.NoError(t, err)

	cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "mcp")
	cmd.Env = mcpEnv("AGENTSPACE_ACTOR=stdio-agent")
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tools.Tools), 10)
	callOK := func(name string, args map[string]any) map[string]any {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, res.Content)
		var m map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	claimed := callOK("task_claim", nil)
	assert.Equal(t, task.ID, claimed["id"])
	assert.Equal(t, "stdio-agent", claimed["assignee"])
	callOK("artifact_write", map[string]any{"name": "out.md", "content": "hi"})
	callOK("task_update", map[string]any{"id": task.ID, "action": "done", "artifacts": []string{"out.md"}})

	got, err := ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, got.Status)
	a, err := ws.Artifacts().Get(ctx, workspace.ByName("out.md"))
	require.NoError(t, err)
	assert.Equal(t, "stdio-agent", a.CreatedBy)
}

// TestMCPCommandAnswersEveryRequestBeforeStdinEnds: a client that writes
// its requests and closes stdin at once still gets every answer.
func TestMCPCommandAnswersEveryRequestBeforeStdinEnds(t *testing.T) {
	dsn, _ := newMCPWorkspace(t)
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	const calls = 20
	for i := 1; i <= calls; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"task_add","arguments":{"title":"t%d"}}}`+"\n", i, i)
	}
	cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "mcp", "--as", "piper")
	cmd.Env = mcpEnv()
	cmd.Stdin = &in
	out, err := cmd.Output()
	require.NoError(t, err)
	answered := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		if m.ID != nil && m.Result != nil {
			answered[*m.ID] = true
		}
	}
	assert.Len(t, answered, calls+1, "initialize and every call answered: %s", out)
}

// TestTypeScriptSDKClientDrivesWsctlMCP runs the official TypeScript SDK's
// client (mcp/testdata/ts-client, installed with npm ci) against wsctl
// mcp: it lists the tools and claims, writes and finishes a task.
func TestTypeScriptSDKClientDrivesWsctlMCP(t *testing.T) {
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_NODE", "SKIPPING the TypeScript MCP client test: node or npm not on PATH")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "mcp", "testdata", "ts-client"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		out, err := install.CombinedOutput()
		require.NoError(t, err, "npm ci: %s", out)
	}

	dsn, ws := newMCPWorkspace(t)
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "boss"}, workspace.NewTask{Title: "for TypeScript"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "ts-agent"}, workspace.NotePut{Kind: "glossary", Key: "ts", Body: "the TypeScript agent"})
	require.NoError(t, err)
	ask, err := ws.Messages().Send(ctx, workspace.Write{Actor: "boss"}, workspace.NewMsg{To: []string{"ts-agent"}, Body: "tell me when it is done", RequiresAck: true})
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, node, "client.mjs", wsctlBinary(t), dsn)
	cmd.Dir = dir
	cmd.Env = mcpEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node client.mjs: %s", stderr.String())
	var seen struct {
		Tools    []string `json:"tools"`
		Claimed  string   `json:"claimed"`
		Version  int      `json:"version"`
		Status   string   `json:"status"`
		Conflict string   `json:"conflict"`
		Notice   string   `json:"notice"`
		Unread   int      `json:"unread"`
		Acked    []string `json:"acked"`
		Sent     string   `json:"sent"`
	}
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(out), &seen), "%s", out)
	assert.Contains(t, seen.Tools, "task_claim")
	assert.Contains(t, seen.Tools, "events_wait")
	assert.Equal(t, task.ID, seen.Claimed)
	assert.Equal(t, 1, seen.Version)
	assert.Equal(t, "done", seen.Status)
	assert.Equal(t, "conflict", seen.Conflict)
	assert.Equal(t, "agentspace: you have 1 unread and 1 awaiting your ack (inbox)", seen.Notice)
	assert.Equal(t, 0, seen.Unread, "mark_read moved the cursor")
	assert.Equal(t, []string{"ts-agent"}, seen.Acked)
	got0, err := ws.Messages().Get(ctx, ask.ID)
	require.NoError(t, err)
	require.Len(t, got0.Acks, 1)
	assert.Equal(t, "done in ts", got0.Acks[0].Reply)
	reply, err := ws.Messages().Get(ctx, seen.Sent)
	require.NoError(t, err)
	assert.Equal(t, "ts-agent", reply.From)
	assert.Equal(t, ask.Thread, reply.Thread, "a reply joins the thread")

	got, err := ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, got.Status)
	assert.Equal(t, "ts-agent", got.Assignee)
	assert.Equal(t, []string{"ts/out.md"}, got.Result.Artifacts)
}
