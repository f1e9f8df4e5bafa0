package conformance

import (
	"os"
	"testing"

	"github.com/agentspace/agentspace/workspace"
)

func childRole() string { return os.Getenv(childEnv) }

// testSmoke is the first thing a new backend should pass: create, read
// back, update with a version, and see the events.
func testSmoke(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	w := workspace.Write{Actor: "planner"}
	a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Kind: "plan", Content: []byte("hello")})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if a.Version != 1 {
		t.Fatalf("version = %d, want 1", a.Version)
	}
	got, err := ws.Artifacts().Get(ctx, workspace.ByName("plans/a.md"))
	if err != nil || string(got.Content) != "hello" {
		t.Fatalf("get = %q, %v", got.Content, err)
	}
	w.IfVersion = 1
	if _, err := ws.Artifacts().Update(ctx, w, workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("v2")}); err != nil {
		t.Fatalf("update: %v", err)
	}
	page, err := ws.Events().Read(ctx, workspace.EventQuery{})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(page.Events) != 2 || page.Events[0].Seq != 1 || page.Events[1].Seq != 2 {
		t.Fatalf("events = %+v", page.Events)
	}
}
