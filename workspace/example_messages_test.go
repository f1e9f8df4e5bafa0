package workspace_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// A lead, two workers and a reviewer talk through the workspace: the lead
// asks the workers to confirm a plan (each must ack) and the reviewer role
// to review (any one member answers). worker-2 never answers; once the
// deadline passes, whoever checks first escalates the message to the
// admin role, once. The clock is the test's (Options.Clock), so nothing
// sleeps; programs leave it nil and use the store's clock.
func ExampleWorkspace_Messages() {
	dir, err := os.MkdirTemp("", "agentspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "workspace.db"), workspace.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	policy := `
default_role = "agent"
[roles.agent]
artifacts_read = ["**"]
artifacts_write = ["**"]
notes_read = ["*"]
tasks = ["*"]
[roles.reviewer]
artifacts_read = ["**"]
[actors]
lead = ["agent"]
worker-1 = ["agent"]
worker-2 = ["agent"]
rita = ["reviewer"]
ops = ["admin"]
`
	as := func(actor string) context.Context { return workspace.AsActor(ctx, actor) }
	if _, err := ws.Artifacts().Create(as("ops"), workspace.Write{Actor: "ops"}, workspace.NewArtifact{
		Name: workspace.PolicyArtifact, Kind: "policy", Content: []byte(policy)}); err != nil {
		log.Fatal(err)
	}

	// The plan and the message about it commit together.
	res, err := ws.Commit(as("lead"), workspace.Batch{Actor: "lead", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "plans/api.md", Content: []byte("REST, bearer tokens")}},
		workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{"worker-1", "worker-2"}, Type: "question",
			Subject: "plans/api.md", Body: "Confirm you build against this plan.", RequiresAck: true, Deadline: clock().Add(time.Hour)}},
		workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{"role:reviewer"}, Subject: "review plans/api.md",
			Body: "Review the plan, please.", RequiresAck: true}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	plan, review := res.Results[1].Msg, res.Results[2].Msg

	in, err := ws.Messages().Inbox(as("worker-1"), workspace.InboxQuery{Actor: "worker-1", Unacked: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-1 owes acks:", in.Unacked)
	if _, err := ws.Messages().Ack(as("worker-1"), workspace.Write{Actor: "worker-1"}, plan.ID, "building on it"); err != nil {
		log.Fatal(err)
	}
	m, err := ws.Messages().Ack(as("rita"), workspace.Write{Actor: "rita"}, review.ID, "LGTM")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("review acked by %s for %s\n", m.Acks[0].By, m.Acks[0].For)

	mu.Lock()
	now = now.Add(2 * time.Hour) // worker-2 never answered
	mu.Unlock()
	esc, err := ws.Messages().Escalate(ctx, "lead")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("escalated:", len(esc), "still owed by", esc[0].Pending)
	again, err := ws.Messages().Escalate(ctx, "lead")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("escalated again:", len(again))
	ops, err := ws.Messages().Inbox(as("ops"), workspace.InboxQuery{Actor: "ops"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ops got:", ops.Messages[0].Type, "-", ops.Messages[0].Subject)
	// Output:
	// worker-1 owes acks: 1
	// review acked by rita for role:reviewer
	// escalated: 1 still owed by [worker-2]
	// escalated again: 0
	// ops got: escalation - unacknowledged: plans/api.md
}
