// Command agentteam runs a small simulated team of agents on one shared
// workspace: a planner breaks a goal into tasks with dependencies and notes
// its decisions, two workers claim tasks and publish their artifacts under
// locks, and a reviewer reviews the result. The live event stream is
// printed as it happens. It finishes by itself in a few seconds and leaves
// the workspace for `wsctl` to inspect.
//
//	go run ./examples/agentteam                      # sqlite:.agentspace/workspace.db
//	go run ./examples/agentteam -dsn json:./team-ws  # any backend: sqlite:, json:, postgres://
//
// Every run has its own id (its start time and a random suffix), so runs on
// one workspace, even in the same second, keep their tasks and artifacts apart.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

func main() {
	dsn := flag.String("dsn", workspace.DefaultDSN, "workspace DSN")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		log.SetFlags(0)
		log.Fatalf("agentteam: %v", err)
	}
}

// run runs one team on dsn, printing the event stream and a summary to out.
func run(ctx context.Context, dsn string, out io.Writer) error {
	start := time.Now()
	// Each agent opens its own handle, as separate processes would.
	open := func() (*workspace.Workspace, error) { return workspace.Open(ctx, dsn) }
	planner, err := open()
	if err != nil {
		return err
	}
	defer planner.Close()

	head, err := planner.Events().Head(ctx)
	if err != nil {
		return err
	}
	runID, err := newRunID(start)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "agentteam: run %s on %s (event log at seq %d)\n\n", runID, workspace.RedactDSN(dsn), head)

	// Follow the log live from where it stands now, on a handle of its own.
	watcher, err := open()
	if err != nil {
		return err
	}
	defer watcher.Close()
	sub, err := watcher.Events().Subscribe(ctx, workspace.SubscribeRequest{
		Query: workspace.EventQuery{AfterSeq: head}, Heartbeat: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer sub.Close()
	var stopAt atomic.Int64 // set to the final head once the team is done
	stopAt.Store(math.MaxInt64)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for m := range sub.C() {
			if !m.Progress {
				e := m.Event
				fmt.Fprintf(out, "  #%-4d %-10s %-20s %s %s\n", e.Seq, e.Actor, e.Type, subjectName(e.Subject), e.Message)
			}
			if m.Head >= stopAt.Load() && (m.Progress || m.Event.Seq >= stopAt.Load()) {
				return
			}
		}
	}()

	plan, err := makePlan(ctx, planner, runID)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"worker-1", "worker-2", "reviewer"} {
		ws, err := open()
		if err != nil {
			return err
		}
		defer ws.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(ctx, ws, name, runID, len(plan)); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return err
	}

	// Let the stream print up to the last event, then stop it.
	final, err := planner.Events().Head(ctx)
	if err != nil {
		return err
	}
	stopAt.Store(final)
	<-printed

	return summarize(ctx, planner, out, dsn, runID, plan, time.Since(start))
}

// newRunID names a run by its start time and a random suffix, so that two
// runs started in the same second do not collide.
func newRunID(start time.Time) (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return start.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

// summarize prints the run's tasks as a table, then the workspace's totals.
func summarize(ctx context.Context, ws *workspace.Workspace, out io.Writer, dsn, runID string, plan []string, took time.Duration) error {
	fmt.Fprintf(out, "\nagentteam: run %s finished in %s\n\n", runID, took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tBY\tTRIES\tARTIFACT")
	for _, id := range plan {
		t, err := ws.Tasks().Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", t.Title, t.Status, t.Assignee, t.Attempts, strings.Join(t.Result.Artifacts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	st, err := ws.Status(ctx)
	if err != nil {
		return err
	}
	var counts []string
	for _, s := range []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked,
		workspace.TaskDone, workspace.TaskFailed, workspace.TaskCancelled} {
		if n := st.Tasks[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(out, "\nworkspace: %d artifacts, %d notes, tasks: %s, %d live locks, event log at seq %d\n",
		st.Artifacts, st.Notes, strings.Join(counts, ", "), len(st.Locks), st.Head)
	w := "wsctl"
	if dsn != workspace.DefaultDSN {
		w += " --dsn '" + workspace.RedactDSN(dsn) + "'"
	}
	fmt.Fprintf(out, "inspect it with: %[1]s status; %[1]s artifact ls; %[1]s events\n", w)
	return nil
}

// step is one task of the plan: who should do it, what it produces, and
// which earlier steps it waits for.
type step struct {
	title    string
	role     string
	artifact string
	after    []int
}

func makePlan(ctx context.Context, ws *workspace.Workspace, runID string) ([]string, error) {
	me := workspace.Write{Actor: "planner"}
	prefix := "runs/" + runID + "/"
	if _, err := ws.Notes().Put(ctx, me, workspace.NotePut{
		Kind: "decision", Key: "api-style-" + runID, Title: "REST over gRPC",
		Body: "Agents call the service with curl; REST keeps the tools simple.",
	}); err != nil {
		return nil, err
	}
	if _, err := ws.Artifacts().Create(ctx, me, workspace.NewArtifact{
		Name: prefix + "plan.md", Kind: "plan", ContentType: "text/markdown",
		Content: []byte("# Plan\n1. Design the API\n2. Implement it\n3. Test it\n4. Review\n"),
	}); err != nil {
		return nil, err
	}
	steps := []step{
		{title: "design the API", role: "worker", artifact: "design.md"},
		{title: "implement the handlers", role: "worker", artifact: "api.go", after: []int{0}},
		{title: "write the tests", role: "worker", artifact: "api_test.go", after: []int{0}},
		{title: "review the change", role: "reviewer", artifact: "review.md", after: []int{1, 2}},
	}
	ids := make([]string, len(steps))
	for i, s := range steps {
		var deps []string
		for _, j := range s.after {
			deps = append(deps, ids[j])
		}
		t, err := ws.Tasks().Create(ctx, me, workspace.NewTask{
			Title: s.title, DependsOn: deps, Priority: len(steps) - i,
			Labels: map[string]string{"run": runID, "role": s.role, "artifact": prefix + s.artifact},
		})
		if err != nil {
			return nil, err
		}
		ids[i] = t.ID
	}
	return ids, nil
}

// work claims tasks of the agent's role until the run has none left.
func work(ctx context.Context, ws *workspace.Workspace, name, runID string, total int) error {
	role := "worker"
	if name == "reviewer" {
		role = "reviewer"
	}
	for {
		t, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{
			Actor: name, Lease: 30 * time.Second,
			Labels: map[string]string{"run": runID, "role": role},
		})
		if errors.Is(err, workspace.ErrNoTask) {
			done, err := finished(ctx, ws, runID, total)
			if err != nil || done {
				return err
			}
			time.Sleep(20 * time.Millisecond) // a dependency is still in progress
			continue
		}
		if err != nil {
			return err
		}
		if err := do(ctx, ws, name, t); err != nil {
			return err
		}
	}
}

// do writes the task's artifact under a lock, fenced by the lock's token, and
// in one batch marks the task done and releases the lock.
func do(ctx context.Context, ws *workspace.Workspace, name string, t workspace.Task) error {
	artifact := t.Labels["artifact"]
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: "artifact:" + artifact, Owner: name, TTL: 10 * time.Second, Wait: true,
	})
	if err != nil {
		return err
	}
	content := fmt.Sprintf("%s by %s\n", t.Title, name)
	kind := "code"
	if strings.HasSuffix(artifact, ".md") {
		kind = "design"
	}
	if name == "reviewer" {
		kind = "review"
		page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: strings.TrimSuffix(artifact, "review.md")})
		if err != nil {
			return err
		}
		var b strings.Builder
		b.WriteString("# Review\n")
		for _, a := range page.Artifacts {
			fmt.Fprintf(&b, "- %s v%d (%s): looks good\n", a.Name, a.Version, a.UpdatedBy)
		}
		content = b.String()
	}
	time.Sleep(50 * time.Millisecond) // thinking
	_, err = ws.Commit(ctx, workspace.Batch{Actor: name, Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{
			Name: artifact, Kind: kind, ContentType: "text/plain", Content: []byte(content), TaskID: t.ID,
		}},
		workspace.UpdateTaskOp{ID: t.ID, Change: workspace.TaskChange{
			Status: ptr(workspace.TaskDone),
			Result: &workspace.TaskResult{Summary: "wrote " + artifact, Artifacts: []string{artifact}},
		}, Cond: workspace.Cond{IfVersion: t.Version}},
		workspace.ReleaseLockOp{Resource: lease.Resource, Token: lease.Token},
	}})
	return err
}

func finished(ctx context.Context, ws *workspace.Workspace, runID string, total int) (bool, error) {
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskDone, Labels: map[string]string{"run": runID}})
	if err != nil {
		return false, err
	}
	return len(page.Tasks) == total, nil
}

func subjectName(s workspace.Subject) string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
