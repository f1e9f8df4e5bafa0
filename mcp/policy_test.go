package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// plannerPolicy opens a workspace whose policy lets bob (a planner) read
// and write plans/** only, with root its admin, and has root create the
// artifacts named, each with the content "x NAME".
func plannerPolicy(t *testing.T, names ...string) *workspace.Workspace {
	t.Helper()
	ws := openWS(t, sqliteBackend.dsn(t))
	root := workspace.Write{Actor: "root"}
	_, err := ws.Artifacts().Create(context.Background(), root, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(`[roles.planner]
artifacts_read  = ["plans/**"]
artifacts_write = ["plans/**"]
[actors]
root = ["admin"]
bob = ["planner"]
`)})
	require.NoError(t, err)
	for _, name := range names {
		_, err = ws.Artifacts().Create(context.Background(), root, workspace.NewArtifact{Name: name, Content: []byte("x " + name)})
		require.NoError(t, err)
	}
	return ws
}

// TestPolicyRefusalIsClassForbidden: a write or read the workspace's
// policy refuses comes back as class forbidden, with the action and the rule.
func TestPolicyRefusalIsClassForbidden(t *testing.T) {
	ws := plannerPolicy(t)
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	ok(t, bob, "artifact_write", map[string]any{"name": "plans/a.md", "content": "x"})
	te := fails(t, bob, "artifact_write", map[string]any{"name": "src/a.go", "content": "x"}, mcp.ClassForbidden)
	assert.Equal(t, "artifact.write", te.Action)
	assert.Equal(t, "artifacts_write", te.Rule)
	assert.NotEmpty(t, te.Reason)
	// Reads act as the server's actor too.
	_, err := ws.Artifacts().Create(context.Background(), workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: "secret/k", Content: []byte("k")})
	require.NoError(t, err)
	te = fails(t, bob, "artifact_read", map[string]any{"name": "secret/k"}, mcp.ClassForbidden)
	assert.Equal(t, "artifact.read", te.Action)
}

// TestEventsLeaveOutWhatTheActorMayNotRead: events_wait and status, as an
// actor under a policy, carry no event about an artifact it may not read,
// whatever the call names; a wait is not woken by one either.
func TestEventsLeaveOutWhatTheActorMayNotRead(t *testing.T) {
	ws := plannerPolicy(t, "plans/a.md", "secret/k")
	ctx := context.Background()
	root := workspace.Write{Actor: "root"}
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	names := func(page map[string]any, key string) []string {
		var out []string
		evs, _ := page[key].([]any)
		for _, e := range evs {
			out = append(out, e.(map[string]any)["subject"].(map[string]any)["name"].(string))
		}
		return out
	}
	all := ok(t, bob, "events_wait", map[string]any{"after_seq": 0, "timeout_seconds": 1})
	assert.Equal(t, []string{workspace.PolicyArtifact, "plans/a.md"}, names(all, "events"))
	named := ok(t, bob, "events_wait", map[string]any{"after_seq": 0, "subject_name": "secret/k", "timeout_seconds": 1})
	assert.Empty(t, named["events"])
	recent := names(ok(t, bob, "status", map[string]any{}), "recent_events")
	assert.Contains(t, recent, "plans/a.md")
	assert.NotContains(t, recent, "secret/k")

	// A live wait: the secret's change does not wake it; the plan's does.
	h := head(t, ws)
	got := make(chan map[string]any, 1)
	go func() {
		res, err := bob.CallTool(ctx, &sdk.CallToolParams{Name: "events_wait", Arguments: map[string]any{"after_seq": h, "timeout_seconds": 30}})
		if err == nil {
			got <- decode(t, res).data
		}
		close(got)
	}()
	_, err := ws.Artifacts().Update(ctx, root, workspace.ByName("secret/k"), workspace.ArtifactChange{Content: []byte("y")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, root, workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("y")})
	require.NoError(t, err)
	select {
	case page := <-got:
		require.NotNil(t, page)
		assert.Equal(t, []string{"plans/a.md"}, names(page, "events"))
	case <-time.After(20 * time.Second):
		t.Fatal("events_wait did not return on the plan's change")
	}
}

// TestResourcesFollowThePolicy: resources/read and resources/subscribe act
// as the server's actor, as the tools do: an artifact it may not read is
// refused, so neither its content nor the news that it changed reaches the
// session. Under the legacy protocol the refusal is Subscribe's error;
// under the stateless one (subscriptions/listen) the subscription is not
// made.
func TestResourcesFollowThePolicy(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			ws := plannerPolicy(t, "plans/a.md", "secret/k")
			ctx := testCtx(t)
			root := workspace.Write{Actor: "root"}
			updates := make(chan string, 64)
			bob := connect(t, newServer(t, ws, "bob"), version, &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
				updates <- r.Params.URI
			}})

			read, err := bob.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ArtifactURI("plans/a.md")})
			require.NoError(t, err)
			assert.Equal(t, "x plans/a.md", read.Contents[0].Text)
			_, err = bob.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ArtifactURI("secret/k")})
			require.Error(t, err)
			assert.Contains(t, err.Error(), mcp.ClassForbidden)
			assert.NotContains(t, err.Error(), "x secret/k")

			if version != "" {
				for _, name := range []string{"secret/k", "secret/not-yet"} {
					err := bob.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ArtifactURI(name)})
					require.Error(t, err, "subscribe to %s", name)
					assert.Contains(t, err.Error(), mcp.ClassForbidden)
				}
			}
			// Ask for both; change both until a notification comes: only
			// the plan is ever named.
			for _, name := range []string{"secret/k", "plans/a.md"} {
				go func() { _ = bob.Subscribe(context.Background(), &sdk.SubscribeParams{URI: mcp.ArtifactURI(name)}) }()
			}
			var n int
			for got := false; !got; n++ {
				require.Less(t, n, 100, "no resources/updated notification")
				for _, name := range []string{"secret/k", "plans/a.md"} {
					_, err = ws.Artifacts().Update(ctx, root, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(name + strings.Repeat(".", n))})
					require.NoError(t, err)
				}
				select {
				case uri := <-updates:
					assert.Equal(t, mcp.ArtifactURI("plans/a.md"), uri)
					got = true
				case <-time.After(100 * time.Millisecond):
				}
			}
			// A few more changes of the secret: still nothing about it.
			for i := range 5 {
				_, err = ws.Artifacts().Update(ctx, root, workspace.ByName("secret/k"), workspace.ArtifactChange{Content: []byte(fmt.Sprint("s", i))})
				require.NoError(t, err)
			}
			time.Sleep(200 * time.Millisecond)
			for len(updates) > 0 {
				assert.Equal(t, mcp.ArtifactURI("plans/a.md"), <-updates)
			}
		})
	}
}
