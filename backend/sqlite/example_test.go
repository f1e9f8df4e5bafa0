package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// Opening a workspace by DSN creates the file and its schema; the second
// write is conditional on the version the first one returned.
func Example() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ws.Close()

	a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner"},
		workspace.NewArtifact{Name: "plans/api.md", Kind: "plan", Content: []byte("# API")})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "reviewer", IfVersion: a.Version},
		workspace.ByName("plans/api.md"), workspace.ArtifactChange{Content: []byte("# API v2")})
	if err != nil {
		fmt.Println(err)
		return
	}
	page, err := ws.Events().Read(ctx, workspace.EventQuery{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version", a.Version)
	for _, e := range page.Events {
		fmt.Println(e.Seq, e.Type, e.Actor)
	}
	// Output:
	// version 2
	// 1 artifact.created planner
	// 2 artifact.updated reviewer
}
