package mcp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

const racers = 8

// TestRacingClientsClaimEachTaskOnceAndTokensIncrease: 8 MCP clients, each
// with its own server and workspace handle on one store, drain one pool
// of tasks and take turns on one lock. Every task goes to exactly one of
// them, and the lock's tokens strictly increase in the order it was taken.
func TestRacingClientsClaimEachTaskOnceAndTokensIncrease(t *testing.T) {
	for _, b := range []backend{sqliteBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			setup := openWS(t, dsn)
			const tasks = 40
			ids := map[string]bool{}
			for i := range tasks {
				tk, err := setup.Tasks().Create(context.Background(), workspace.Write{Actor: "boss"}, workspace.NewTask{Title: fmt.Sprint("task ", i)})
				require.NoError(t, err)
				ids[tk.ID] = true
			}
			clients := make([]*sdk.ClientSession, racers)
			for i := range clients {
				clients[i] = connect(t, newServer(t, openWS(t, dsn), fmt.Sprint("agent-", i)), "", nil)
			}

			var mu sync.Mutex
			claimedBy := map[string][]int{}
			var tokens []int64
			var wg sync.WaitGroup
			for i, cs := range clients {
				wg.Go(func() {
					for {
						r := call(t, cs, "task_claim", nil)
						if r.isError {
							assert.Equal(t, mcp.ClassNoTask, r.err.Error, r.text)
							break
						}
						id := r.data["id"].(string)
						mu.Lock()
						claimedBy[id] = append(claimedBy[id], i)
						mu.Unlock()
						ok(t, cs, "task_update", map[string]any{"id": id, "action": "done"})
					}
					for range 3 {
						l := ok(t, cs, "lock", map[string]any{"op": "acquire", "resource": "file:shared", "ttl_seconds": 30, "wait_seconds": 60})
						mu.Lock()
						tokens = append(tokens, num(l["token"]))
						mu.Unlock()
						ok(t, cs, "lock", map[string]any{"op": "release", "resource": "file:shared", "token": l["token"]})
					}
				})
			}
			wg.Wait()

			assert.Len(t, claimedBy, tasks, "every task was claimed")
			for id, by := range claimedBy {
				assert.True(t, ids[id])
				assert.Len(t, by, 1, "task %s went to exactly one client", id)
			}
			require.Len(t, tokens, racers*3)
			// Tokens were recorded after each acquire and before its release,
			// so under mutual exclusion they are recorded in acquisition order.
			for i := 1; i < len(tokens); i++ {
				assert.Greater(t, tokens[i], tokens[i-1], "tokens strictly increase")
			}
		})
	}
}
