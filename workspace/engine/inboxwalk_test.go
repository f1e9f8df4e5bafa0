package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

const inboxPolicy = `
default_role = "worker"

[roles.worker]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read = ["*"]
notes_write = ["*"]

[roles.reviewer]
artifacts_read = ["**"]

[actors]
root = ["admin"]
lead = ["worker"]
rev1 = ["reviewer"]
rev2 = ["reviewer"]
rev3 = ["reviewer", "worker"]
`

// TestInboxWalkIsTheFullRecomputation: after each step of a random run
// of sends (to actors, roles, a role's each member, replies), acks, read
// cursor moves and retention, every page of every inbox under every
// filter, with its counts (from the msg-count counters), is what listing
// every index entry computes; so it is for a store whose counters are
// gone (one written before them), and after its next write counts them.
func TestInboxWalkIsTheFullRecomputation(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") },
		"json":     func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") },
		"postgres": func(t *testing.T) string { return pgtest.NewDSN(t) },
	}
	// Each backend's walk is a store, a handle and a random source of its
	// own: they run beside each other (the PostgreSQL one mostly waits on
	// its round trips).
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testInboxWalk(t, dsn(t))
		})
	}
}

func testInboxWalk(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = ws.Close() }()
	root := workspace.AsActor(ctx, "root")
	_, err = ws.Artifacts().Create(root, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Kind: "policy", Content: []byte(inboxPolicy)})
	require.NoError(t, err)
	readers := map[string][]string{"lead": {"worker"}, "rev1": {"reviewer"}, "rev2": {"reviewer"}, "rev3": {"reviewer", "worker"}, "root": {"admin"}}
	rcpts := []string{"lead", "rev1", "rev2", "rev3", "root", "role:reviewer", "role:worker", "role:admin"}
	rng := rand.New(rand.NewPCG(53, 4))
	var sent []workspace.Msg
	var sends, acks int
	check := func(step int) {
		t.Helper()
		var after []string
		after = append(after, "")
		for range 3 {
			if len(sent) > 0 {
				after = append(after, sent[rng.IntN(len(sent))].ID)
			}
		}
		for a, roles := range readers {
			for _, rs := range [][]string{roles, nil, {"reviewer", "worker", "admin"}} {
				for _, f := range []struct{ unread, unacked bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
					for _, af := range after {
						q := workspace.InboxQuery{Actor: a, Unread: f.unread, Unacked: f.unacked, After: af, Limit: 1 + rng.IntN(6)}
						if rng.IntN(4) == 0 && len(sent) > 0 {
							q.Thread = sent[rng.IntN(len(sent))].Thread
						}
						got, want, err := engine.InboxPair(ctx, ws, q, rs)
						require.NoError(t, err)
						require.Equal(t, want, got, "step %d, %s as %v, %+v", step, a, rs, q)
					}
				}
			}
		}
	}
	for step := range 120 {
		switch k := rng.IntN(10); {
		case k < 5 || len(sent) == 0:
			n := workspace.NewMsg{Body: fmt.Sprint("m", step), RequiresAck: rng.IntN(2) == 0}
			for _, r := range rcpts {
				if rng.IntN(4) == 0 {
					n.To = append(n.To, r)
				}
			}
			if len(n.To) == 0 {
				n.To = []string{rcpts[rng.IntN(len(rcpts))]}
			}
			n.Each = n.RequiresAck && rng.IntN(2) == 0
			if len(sent) > 0 && rng.IntN(3) == 0 {
				n.ReplyTo = sent[rng.IntN(len(sent))].ID
			}
			m, err := ws.Messages().Send(workspace.AsActor(ctx, "root"), workspace.Write{Actor: "root"}, n)
			if err != nil {
				continue // a reply to a message retention removed
			}
			sent = append(sent, m)
			sends++
		case k < 7:
			a := []string{"lead", "rev1", "rev2", "rev3", "root"}[rng.IntN(5)]
			m := sent[rng.IntN(len(sent))]
			if _, err := ws.Messages().Ack(workspace.AsActor(ctx, a), workspace.Write{Actor: a}, m.ID, ""); err == nil {
				acks++
			}
		case k < 9:
			a := []string{"lead", "rev1", "rev2", "rev3", "root"}[rng.IntN(5)]
			m := sent[rng.IntN(len(sent))]
			_ = ws.Messages().MarkRead(workspace.AsActor(ctx, a), a, m.ID)
		default:
			_, err := ws.GC(root, workspace.GCPolicy{Actor: "root", KeepMessagesFor: time.Millisecond})
			require.NoError(t, err)
			sent = slices.DeleteFunc(sent, func(m workspace.Msg) bool {
				_, err := ws.Messages().Get(root, m.ID)
				return err != nil
			})
		}
		if step%10 == 9 {
			check(step)
		}
		if step == 59 {
			// A store written before the counters: its reads walk, and
			// its next message write counts every entry.
			require.NoError(t, engine.DropMessageCounters(ctx, ws))
			ok, err := engine.MessageCounted(ctx, ws)
			require.NoError(t, err)
			require.False(t, ok)
			check(step)
		}
	}
	check(120)
	ok, err := engine.MessageCounted(ctx, ws)
	require.NoError(t, err)
	require.True(t, ok, "the first write after step 59 counted the old entries")
	require.Greater(t, sends, 40, "sends that succeeded")
	require.Greater(t, acks, 5, "acks that succeeded")
}
