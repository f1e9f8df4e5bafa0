package remote_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestTwoServersOnOnePostgresSchemaAreOneWorkspace runs two servers, each
// with a store of its own (as two processes have) on one schema, with
// clients on each: racing claims give every task to exactly one claimer,
// a contended lock's tokens strictly increase, racing IfVersion writes
// have exactly one winner, and subscribers on both servers see the same
// gap-free log.
func TestTwoServersOnOnePostgresSchemaAreOneWorkspace(t *testing.T) {
	store := pgtest.WithParams(t, pgtest.NewDSN(t), "ws_private", "true")
	urls := []string{serve(t, store, false, server.Options{MaxWait: 2 * time.Second}), serve(t, store, false, server.Options{MaxWait: 2 * time.Second})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clients := make([]*workspace.Workspace, 8)
	for i := range clients {
		ws, err := workspace.Open(ctx, urls[i%2])
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		clients[i] = ws
	}
	subs := make([]*workspace.Subscription, 2)
	for i := range subs {
		sub, err := clients[i].Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Close() })
		subs[i] = sub
	}

	// Claims.
	const tasks = 40
	var ops []workspace.Op
	for i := range tasks {
		ops = append(ops, workspace.CreateTaskOp{Task: workspace.NewTask{Title: fmt.Sprint("job ", i)}})
	}
	_, err := clients[0].Commit(ctx, workspace.Batch{Actor: "lead", Ops: ops})
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		claimed = map[string]string{}
		wg      sync.WaitGroup
	)
	for i, ws := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actor := fmt.Sprint("claimer-", i)
			for {
				task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor})
				if errors.Is(err, workspace.ErrNoTask) {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				assert.Empty(t, claimed[task.ID], "task %s claimed twice", task.ID)
				claimed[task.ID] = actor
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, claimed, tasks, "every task claimed")

	// Locks: whoever holds the lease appends its token, so the slice is
	// in the order the lease changed hands.
	var tokens []int64
	for i, ws := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("locker-", i)
			for range 5 {
				l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:shared", Owner: owner, TTL: time.Minute, Wait: true})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token)
				mu.Unlock()
				assert.NoError(t, ws.Locks().Release(ctx, l))
			}
		}()
	}
	wg.Wait()
	require.Len(t, tokens, 5*len(clients))
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "tokens strictly increase")
	}

	// IfVersion writes.
	a, err := clients[0].Artifacts().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewArtifact{Name: "plan.md", Content: []byte("v1")})
	require.NoError(t, err)
	wins := 0
	for i, ws := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: fmt.Sprint("writer-", i), IfVersion: a.Version}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte(fmt.Sprint("v2 by ", i))})
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
				return
			}
			var ce *workspace.ConflictError
			assert.ErrorAs(t, err, &ce)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, wins, "exactly one IfVersion writer wins")

	// Both servers' subscribers saw the same log, 1..head, no gap.
	head, err := clients[1].Events().Head(ctx)
	require.NoError(t, err)
	var logs [2][]workspace.Event
	for i, sub := range subs {
		for int64(len(logs[i])) < head {
			m, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(len(logs[i])+1), m.Event.Seq, "subscriber %d: no gap, no duplicate", i)
			logs[i] = append(logs[i], m.Event)
		}
	}
	assert.Equal(t, logs[0], logs[1], "both servers' subscribers see the same log")
}
