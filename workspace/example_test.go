package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/agentspace/agentspace/backend/sqlite" // registers sqlite:
	"github.com/agentspace/agentspace/workspace"
)

// Opening a DSN creates the store and its schema on first use; every
// program imports the backends it needs, as database/sql programs import
// their drivers.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	n, err := ws.Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{
		Kind: "decision", Key: "storage", Title: "SQLite first", Body: "One host for now.",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n.Kind, n.Key, "version", n.Version)
	// Output:
	// decision storage version 1
}

// An optimistic read-modify-write: read the head, write with IfVersion, and
// on a conflict (another agent wrote in between) read again and retry. Of
// two writers with the same IfVersion exactly one wins.
func ExampleArtifacts_Update_retryOnConflict() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	ref := workspace.ByName("notes/todo.md")
	if _, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner"},
		workspace.NewArtifact{Name: ref.Name, Kind: "plan", Content: []byte("- design\n")}); err != nil {
		log.Fatal(err)
	}

	appendLine := func(actor, line string, meanwhile func()) (workspace.Artifact, error) {
		for {
			head, err := ws.Artifacts().Get(ctx, ref)
			if err != nil {
				return workspace.Artifact{}, err
			}
			if meanwhile != nil {
				meanwhile() // another agent writes between our read and our write
				meanwhile = nil
			}
			next := append(head.Content, line+"\n"...)
			a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: actor, IfVersion: head.Version},
				ref, workspace.ArtifactChange{Content: next})
			var conflict *workspace.ConflictError
			if errors.As(err, &conflict) {
				fmt.Printf("%s: expected version %d, current is %d: retrying\n", actor, conflict.Expected, conflict.Current)
				continue
			}
			return a, err
		}
	}

	a, err := appendLine("worker-1", "- build", func() {
		if _, err := appendLine("worker-2", "- test", nil); err != nil {
			log.Fatal(err)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	final, err := ws.Artifacts().Get(ctx, ref)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", a.Version)
	fmt.Print(string(final.Content))
	// Output:
	// worker-1: expected version 1, current is 2: retrying
	// version 3
	// - design
	// - test
	// - build
}

// An agent's unit of work: claim the best ready task, lock the artifact it
// changes, and in one batch write the artifact (fenced by the lock's token),
// mark the task done and release the lock: all three happen, or none.
func ExampleWorkspace_Commit() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	// The planner writes a plan and a task to extend it.
	planner := workspace.Write{Actor: "planner"}
	if _, err := ws.Artifacts().Create(ctx, planner, workspace.NewArtifact{
		Name: "plans/api.md", Kind: "plan", Content: []byte("# API\n"),
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := ws.Tasks().Create(ctx, planner, workspace.NewTask{Title: "list the endpoints"}); err != nil {
		log.Fatal(err)
	}

	// A worker claims it, locks the plan and works on the head it read.
	task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker-1", Lease: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: "artifact:plans/api.md", Owner: "worker-1", TTL: time.Minute, Wait: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	plan, err := ws.Artifacts().Get(ctx, workspace.ByName("plans/api.md"))
	if err != nil {
		log.Fatal(err)
	}
	revised := append(plan.Content, "- GET /v1/tasks\n"...)

	done := workspace.TaskDone
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "worker-1", Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName("plans/api.md"),
			Change: workspace.ArtifactChange{Content: revised},
			Cond:   workspace.Cond{IfVersion: plan.Version, Fence: lease.Token}},
		workspace.UpdateTaskOp{ID: task.ID, Change: workspace.TaskChange{
			Status: &done, Result: &workspace.TaskResult{Summary: "listed them", Artifacts: []string{"plans/api.md"}},
		}},
		workspace.ReleaseLockOp{Resource: lease.Resource, Token: lease.Token},
	}})
	if err != nil {
		log.Fatal(err)
	}

	page, err := ws.Events().Read(ctx, workspace.EventQuery{})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range page.Events {
		fmt.Println(e.Seq, e.Actor, e.Type, e.Version)
	}
	// Output:
	// 1 planner artifact.created 1
	// 2 planner task.created 1
	// 3 worker-1 task.claimed 2
	// 4 worker-1 lock.acquired 1
	// 5 worker-1 artifact.updated 2
	// 6 worker-1 task.updated 3
	// 7 worker-1 lock.released 1
}

// A follower reads the log from where it last stopped: the backlog first,
// then live events, with no gap and no duplicate. Keeping the last seq it
// handled is all it needs to resume after a restart.
func ExampleEvents_Subscribe() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	put := func(key string) {
		if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "planner"},
			workspace.NotePut{Kind: "glossary", Key: key, Title: strings.ToUpper(key)}); err != nil {
			log.Fatal(err)
		}
	}
	// follow prints n events after seq and returns the last one's seq.
	follow := func(after int64, n int) int64 {
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{
			Query: workspace.EventQuery{AfterSeq: after}, Heartbeat: -1,
		})
		if err != nil {
			log.Fatal(err)
		}
		defer sub.Close()
		for range n {
			m, err := sub.Next(ctx)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(m.Event.Seq, m.Event.Type, m.Event.Subject.Name)
			after = m.Event.Seq
		}
		return after
	}

	put("lease")
	put("fence")
	last := follow(0, 2) // the backlog, then stop
	put("seq")           // written while nobody follows
	wrote := make(chan struct{})
	go func() { put("head"); close(wrote) }() // written while the follower waits
	follow(last, 2)                           // resume: nothing missed, nothing twice
	<-wrote
	// Output:
	// 1 note.put lease
	// 2 note.put fence
	// 3 note.put seq
	// 4 note.put head
}

// TestReadmeSnippetIsExampleWorkspaceCommit keeps the README's Go snippet a
// verbatim copy of ExampleWorkspace_Commit's body, so the snippet users copy
// is one that compiles and runs with a checked output.
func TestReadmeSnippetIsExampleWorkspaceCommit(t *testing.T) {
	const marker = "<!-- ExampleWorkspace_Commit: a copy of its body, checked by workspace/example_test.go -->"
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), marker+"\n```go\n")
	if !ok {
		t.Fatalf("README.md has no ```go block right after the line %s", marker)
	}
	snippet, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatal("README.md: the ExampleWorkspace_Commit block is not closed")
	}

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ExampleWorkspace_Commit" {
			// From the line after "{" to the line before "}", one tab less.
			inner := string(src[fset.Position(fn.Body.Lbrace).Offset+2 : fset.Position(fn.Body.Rbrace).Offset-1])
			lines := strings.Split(inner, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, "\t")
			}
			body = strings.Join(lines, "\n")
		}
	}
	if body == "" {
		t.Fatal("example_test.go has no ExampleWorkspace_Commit")
	}
	if snippet != body {
		t.Errorf("README.md's snippet differs from ExampleWorkspace_Commit's body; copy the body over.\nREADME:\n%s\nexample:\n%s", snippet, body)
	}
}
