// Command mcpagents drives two agents through the workspace's MCP tools,
// as coding agents do: each is an MCP client with its own server acting
// as it (what `wsctl mcp --as NAME` gives each agent), and both loop
// claim -> lock -> write with the fence -> done until no task is ready.
// It prints each tool call and its answer, like an agent's transcript.
//
//	go run ./examples/mcpagents                      # sqlite:.agentspace/workspace.db
//	go run ./examples/mcpagents -dsn json:./mcp-ws   # any backend
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

func main() {
	dsn := flag.String("dsn", workspace.DefaultDSN, "workspace DSN")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		log.SetFlags(0)
		log.Fatalf("mcpagents: %v", err)
	}
}

// agent is one MCP client session acting as name.
type agent struct {
	name string
	cs   *sdk.ClientSession
	out  *transcript
}

// transcript serialises the agents' lines.
type transcript struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *transcript) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, format, args...)
}

// call makes one tool call, prints it and its answer, and decodes the
// answer; a tool error comes back as its class.
func (a *agent) call(ctx context.Context, tool string, args map[string]any) (map[string]any, string, error) {
	res, err := a.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, "", err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "", err
	}
	in, _ := json.Marshal(args)
	if res.IsError {
		a.out.printf("%-6s -> %s %s\n       <- error %s: %s\n", a.name, tool, in, m["error"], m["hint"])
		return m, m["error"].(string), nil
	}
	a.out.printf("%-6s -> %s %s\n       <- %s\n", a.name, tool, in, summary(m))
	return m, "", nil
}

// summary shows the fields of a record an agent looks at.
func summary(m map[string]any) string {
	var b strings.Builder
	for _, k := range []string{"title", "name", "resource", "status", "version", "token"} {
		if v, ok := m[k]; ok {
			fmt.Fprintf(&b, "%s=%v ", k, v)
		}
	}
	if tasks, ok := m["tasks"].([]any); ok {
		fmt.Fprintf(&b, "%d tasks", len(tasks))
	}
	return strings.TrimSpace(b.String())
}

// connect starts an MCP server over ws acting as name, and a client on it.
func connect(ctx context.Context, ws *workspace.Workspace, name string, out *transcript, wg *sync.WaitGroup) (*agent, func(), error) {
	s := mcp.NewServer(ws, mcp.Options{Actor: name})
	st, ct := sdk.NewInMemoryTransports()
	sctx, stop := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.Run(sctx, st)
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &agent{name: name, cs: cs, out: out}, func() { _ = cs.Close(); stop(); _ = s.Close() }, nil
}

// work is one agent's loop until no task is ready.
func (a *agent) work(ctx context.Context, labels map[string]string) error {
	for {
		task, class, err := a.call(ctx, "task_claim", map[string]any{"lease_seconds": 60, "labels": labels})
		if err != nil {
			return err
		}
		if class == "no_task" {
			return nil
		}
		file := fmt.Sprintf("src/%s.go", task["title"])
		lease, class, err := a.call(ctx, "lock", map[string]any{"op": "acquire", "resource": workspace.ArtifactResource(file), "ttl_seconds": 30, "wait_seconds": 10})
		if err != nil || class != "" {
			return fmt.Errorf("lock %s: %v %s", file, err, class)
		}
		content := fmt.Sprintf("package src\n\n// %s, by %s.\n", task["title"], a.name)
		art, class, err := a.call(ctx, "artifact_write", map[string]any{"name": file, "content": content, "kind": "code", "fence": lease["token"], "task_id": task["id"]})
		if err != nil || class != "" {
			return fmt.Errorf("write %s: %v %s", file, err, class)
		}
		if _, _, err := a.call(ctx, "task_update", map[string]any{"id": task["id"], "action": "done", "summary": "wrote " + file, "artifacts": []string{art["name"].(string)}}); err != nil {
			return err
		}
		if _, _, err := a.call(ctx, "lock", map[string]any{"op": "release", "resource": workspace.ArtifactResource(file), "token": lease["token"]}); err != nil {
			return err
		}
	}
}

// run plans four tasks and lets two agents do them through MCP.
func run(ctx context.Context, dsn string, w io.Writer) error {
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ws.Close()
	out := &transcript{w: w}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Tasks carry the run's label, so runs on one workspace keep apart.
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	labels := map[string]string{"run": run}
	agents := make([]*agent, 0, 3)
	for _, name := range []string{"lead", "ada", "linus"} {
		a, stop, err := connect(ctx, ws, name, out, &wg)
		if err != nil {
			return err
		}
		defer stop()
		agents = append(agents, a)
	}
	lead := agents[0]
	for _, part := range []string{"parser", "lexer", "printer", "checker"} {
		if _, class, err := lead.call(ctx, "task_add", map[string]any{"title": part + "_" + run, "labels": labels}); err != nil || class != "" {
			return fmt.Errorf("task_add: %v %s", err, class)
		}
	}
	if _, _, err := lead.call(ctx, "note", map[string]any{"op": "put", "kind": "decision", "key": "style-" + run, "title": "gofmt everything"}); err != nil {
		return err
	}
	errs := make(chan error, 2)
	for _, a := range agents[1:] {
		go func() { errs <- a.work(ctx, labels) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	done, _, err := lead.call(ctx, "task_list", map[string]any{"status": "done", "labels": labels})
	if err != nil {
		return err
	}
	out.printf("done: %d tasks\n", len(done["tasks"].([]any)))
	return nil
}
