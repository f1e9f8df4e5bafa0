package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// toolsListBudget is the most the tools/list answer may take: every byte
// of it sits in each agent's context.
// 10 KB: 9.5 KB until the agents tool (about 470 bytes of the answer)
// came, moved by that and rounded to the KB.
const toolsListBudget = 10240

func TestToolsListIsSmallAndDescribesEveryTool(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	cs := connect(t, newServer(t, ws, "alice"), "", nil)
	res, err := cs.ListTools(testCtx(t), nil)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("tools/list: %d tools, %d bytes", len(res.Tools), len(b))
	assert.LessOrEqual(t, len(b), toolsListBudget)
	assert.GreaterOrEqual(t, len(res.Tools), 10)
	assert.LessOrEqual(t, len(res.Tools), 14)
	for _, tl := range res.Tools {
		assert.NotEmpty(t, tl.Description, tl.Name)
		assert.LessOrEqual(t, strings.Count(tl.Description, ". "), 2, "%s: one or two sentences", tl.Name)
		assert.NotNil(t, tl.InputSchema, tl.Name)
	}
}

func TestEveryToolOnEveryBackend(t *testing.T) {
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ws := openWS(t, b.dsn(t))
			alice := connect(t, newServer(t, ws, "alice"), "", nil)
			bob := connect(t, newServer(t, ws, "bob"), "2025-11-25", nil)
			roundTrip(t, ws, alice, bob)
		})
	}
}

func roundTrip(t *testing.T, ws *workspace.Workspace, alice, bob *sdk.ClientSession) {
	st := ok(t, alice, "status", nil)
	assert.Equal(t, "alice", st["actor"])

	// Tasks: add two, the second after the first; claim gets the first.
	first := ok(t, alice, "task_add", map[string]any{"title": "write the plan", "priority": 5, "labels": map[string]string{"area": "docs"}})
	second := ok(t, alice, "task_add", map[string]any{"title": "review the plan", "depends_on": []string{first["id"].(string)}})
	claimed := ok(t, alice, "task_claim", map[string]any{"lease_seconds": 120})
	assert.Equal(t, first["id"], claimed["id"])
	assert.Equal(t, "in_progress", claimed["status"])
	assert.Equal(t, "alice", claimed["assignee"])
	fails(t, bob, "task_claim", nil, mcp.ClassNoTask)
	ok(t, alice, "task_update", map[string]any{"id": first["id"], "action": "heartbeat", "lease_seconds": 300})
	fails(t, bob, "task_update", map[string]any{"id": first["id"], "action": "done"}, mcp.ClassNotHolder)

	// Lock, then write with the fence; bob is refused with the holder named.
	lease := ok(t, alice, "lock", map[string]any{"op": "acquire", "resource": workspace.ArtifactResource("docs/plan.md"), "ttl_seconds": 120})
	token := num(lease["token"])
	require.Positive(t, token)
	locked := fails(t, bob, "lock", map[string]any{"op": "acquire", "resource": workspace.ArtifactResource("docs/plan.md")}, mcp.ClassLocked)
	assert.Equal(t, "alice", locked.Holder)
	assert.NotNil(t, locked.ExpiresAt)
	a := ok(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "content": "# Plan\n", "kind": "plan",
		"content_type": "text/markdown", "fence": token, "task_id": first["id"]})
	assert.EqualValues(t, 1, num(a["version"]))
	fails(t, bob, "artifact_write", map[string]any{"name": "docs/plan.md", "content": "mine"}, mcp.ClassLocked)
	a = ok(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "content": "# Plan\n\nStep 1.\n", "if_version": 1, "fence": token})
	assert.EqualValues(t, 2, num(a["version"]))
	conflict := fails(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "content": "stale", "if_version": 1}, mcp.ClassConflict)
	assert.EqualValues(t, 2, conflict.CurrentVersion)
	assert.Contains(t, conflict.Hint, "if_version 2")
	fails(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "op": "create", "content": "again"}, mcp.ClassAlreadyExists)

	// Reads: head, a version, the log, the list; bob sees alice's work.
	got := ok(t, bob, "artifact_read", map[string]any{"name": "docs/plan.md"})
	assert.Equal(t, "# Plan\n\nStep 1.\n", got["content"])
	assert.Equal(t, "alice", got["updated_by"])
	v1 := ok(t, bob, "artifact_read", map[string]any{"name": "docs/plan.md", "version": 1})
	assert.Equal(t, "# Plan\n", v1["content"])
	log := ok(t, bob, "artifact_read", map[string]any{"name": "docs/plan.md", "log": true})
	assert.Len(t, log["versions"], 2)
	fails(t, bob, "artifact_read", map[string]any{"name": "docs/none.md"}, mcp.ClassNotFound)
	list := ok(t, bob, "artifact_list", map[string]any{"name_prefix": "docs/"})
	assert.Len(t, list["artifacts"], 1)

	// Finish: done with a summary and the artifact; the dependent task is ready.
	done := ok(t, alice, "task_update", map[string]any{"id": first["id"], "action": "done", "summary": "planned", "artifacts": []string{"docs/plan.md"}})
	assert.Equal(t, "done", done["status"])
	ok(t, alice, "lock", map[string]any{"op": "release", "resource": workspace.ArtifactResource("docs/plan.md"), "token": token})
	next := ok(t, bob, "task_claim", nil)
	assert.Equal(t, second["id"], next["id"])
	rel := ok(t, bob, "task_update", map[string]any{"id": second["id"], "action": "release"})
	assert.Equal(t, "pending", rel["status"])
	ok(t, bob, "task_update", map[string]any{"id": second["id"], "action": "edit", "title": "review the plan twice", "priority": 9})
	blocked := ok(t, bob, "task_update", map[string]any{"id": second["id"], "action": "block"})
	assert.Equal(t, "blocked", blocked["status"])
	ok(t, bob, "task_update", map[string]any{"id": second["id"], "action": "unblock"})
	one := ok(t, bob, "task_list", map[string]any{"id": second["id"]})
	assert.Equal(t, "review the plan twice", one["title"])
	pending := ok(t, bob, "task_list", map[string]any{"status": "pending"})
	assert.Len(t, pending["tasks"], 1)
	third := ok(t, bob, "task_add", map[string]any{"title": "doomed"})
	ok(t, bob, "task_update", map[string]any{"id": third["id"], "action": "cancel"})
	ok(t, bob, "task_claim", nil)
	failed := ok(t, bob, "task_update", map[string]any{"id": second["id"], "action": "fail", "summary": "no time"})
	assert.Equal(t, "failed", failed["status"])

	// Notes.
	n := ok(t, alice, "note", map[string]any{"op": "put", "kind": "decision", "key": "db", "title": "Use Postgres", "body": "for prod"})
	assert.EqualValues(t, 1, num(n["version"]))
	assert.Equal(t, "Use Postgres", ok(t, bob, "note", map[string]any{"op": "get", "kind": "decision", "key": "db"})["title"])
	assert.Len(t, ok(t, bob, "note", map[string]any{"op": "list", "kind": "decision"})["notes"], 1)
	ok(t, bob, "note", map[string]any{"op": "delete", "kind": "decision", "key": "db"})
	fails(t, bob, "note", map[string]any{"op": "get", "kind": "decision", "key": "db"}, mcp.ClassNotFound)

	// Locks: renew, get, list, and a stale token.
	l := ok(t, bob, "lock", map[string]any{"op": "acquire", "resource": "file:go.mod", "ttl_seconds": 30})
	ok(t, bob, "lock", map[string]any{"op": "renew", "resource": "file:go.mod", "token": l["token"], "ttl_seconds": 60})
	assert.Equal(t, "bob", ok(t, alice, "lock", map[string]any{"op": "get", "resource": "file:go.mod"})["owner"])
	assert.Len(t, ok(t, alice, "lock", map[string]any{"op": "list"})["locks"], 1)
	fails(t, alice, "lock", map[string]any{"op": "release", "resource": "file:go.mod", "token": l["token"]}, mcp.ClassNotHolder)
	ok(t, bob, "lock", map[string]any{"op": "release", "resource": "file:go.mod", "token": l["token"]})

	// Rollback and delete.
	rb := ok(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "op": "rollback", "rollback_to": 1})
	assert.EqualValues(t, 3, num(rb["version"]))
	assert.Equal(t, "# Plan\n", ok(t, bob, "artifact_read", map[string]any{"name": "docs/plan.md"})["content"])
	ok(t, alice, "artifact_write", map[string]any{"name": "docs/plan.md", "op": "delete", "if_version": 3})
	fails(t, bob, "artifact_read", map[string]any{"name": "docs/plan.md"}, mcp.ClassNotFound)

	// Events: what happened is in the log, in order, returned at once.
	ev := ok(t, bob, "events_wait", map[string]any{"after_seq": 0, "limit": 1000})
	events := ev["events"].([]any)
	require.NotEmpty(t, events)
	assert.Equal(t, "task.created", events[0].(map[string]any)["type"])
	assert.EqualValues(t, head(t, ws), num(ev["head"]))
}

func TestEventsWaitBlocksUntilSomethingHappens(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	cs := connect(t, newServer(t, ws, "alice"), "", nil)
	h := head(t, ws)

	start := time.Now()
	empty := ok(t, cs, "events_wait", map[string]any{"after_seq": h, "timeout_seconds": 1})
	assert.Empty(t, empty["events"])
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "it waited out its timeout")

	got := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "events_wait",
			Arguments: map[string]any{"after_seq": h, "subject_kind": "task", "timeout_seconds": 30}})
		if err == nil {
			got <- decode(t, res).data
		}
		close(got)
	}()
	// An event that does not match, then one that does.
	_, err := ws.Notes().Put(context.Background(), workspace.Write{Actor: "bob"}, workspace.NotePut{Kind: "decision", Key: "k"})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(context.Background(), workspace.Write{Actor: "bob"}, workspace.NewTask{Title: "wake up"})
	require.NoError(t, err)
	select {
	case page := <-got:
		require.NotNil(t, page)
		events := page["events"].([]any)
		require.Len(t, events, 1)
		assert.Equal(t, "task.created", events[0].(map[string]any)["type"])
	case <-time.After(20 * time.Second):
		t.Fatal("events_wait did not return on the event")
	}
}

func TestArtifactResourcesNotifyOnlyTheirSubscribers(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			ws := openWS(t, sqliteBackend.dsn(t))
			s := newServer(t, ws, "alice")
			updates := make(chan string, 16)
			cs := connect(t, s, version, &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
				updates <- r.Params.URI
			}})
			ctx := testCtx(t)
			w := workspace.Write{Actor: "bob"}
			_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a\n"), ContentType: "text/x-go"})
			require.NoError(t, err)
			_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "src/b.go", Content: []byte("package b\n")})
			require.NoError(t, err)

			templates, err := cs.ListResourceTemplates(ctx, nil)
			require.NoError(t, err)
			require.Len(t, templates.ResourceTemplates, 1)
			read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ArtifactURI("src/a.go")})
			require.NoError(t, err)
			require.Len(t, read.Contents, 1)
			assert.Equal(t, "package a\n", read.Contents[0].Text)
			assert.Equal(t, "text/x-go", read.Contents[0].MIMEType)
			_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ArtifactURI("src/none.go")})
			require.Error(t, err)

			// Under the stateless protocol Subscribe holds a listen request
			// open until Unsubscribe, and the server acknowledges it on its
			// own time: keep changing both artifacts until a notification
			// comes, and check that only the subscribed one is ever named.
			go func() { _ = cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: mcp.ArtifactURI("src/a.go")}) }()
			var n int
			for got := false; !got; n++ {
				require.Less(t, n, 100, "no resources/updated notification")
				for _, name := range []string{"src/b.go", "src/a.go"} {
					_, err = ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(name + strings.Repeat(".", n))})
					require.NoError(t, err)
				}
				select {
				case uri := <-updates:
					assert.Equal(t, mcp.ArtifactURI("src/a.go"), uri, "only the subscribed artifact is notified")
					got = true
				case <-time.After(100 * time.Millisecond):
				}
			}
			require.NoError(t, cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: mcp.ArtifactURI("src/a.go")}))
			for len(updates) > 0 {
				assert.Equal(t, mcp.ArtifactURI("src/a.go"), <-updates)
			}
		})
	}
}
