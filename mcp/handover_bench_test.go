package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkInboxToolHandover times a message's hand-over to a coding
// agent that waits on the inbox tool: from the send's commit to the tool
// call (wait_seconds, mark_read) returning it, over an MCP session on a
// SQLite and a PostgreSQL store. It reports the p50 and p99
// (docs/performance.md).
func BenchmarkInboxToolHandover(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchInboxHandover(b, "sqlite:"+filepath.Join(b.TempDir(), "ws.db")) })
	b.Run("postgres", func(b *testing.B) { benchInboxHandover(b, pgtest.NewDSN(b)) })
}

func benchInboxHandover(b *testing.B, dsn string) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "bob"}, workspace.NotePut{Kind: "friction", Key: "bob", Body: "here"}); err != nil {
		b.Fatal(err)
	}
	s := mcp.NewServer(ws, mcp.Options{Actor: "bob"})
	defer s.Close()
	st, ct := sdk.NewInMemoryTransports()
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(sctx, st) }()
	defer func() { cancel(); <-done }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()

	lats := make([]time.Duration, 0, b.N)
	for b.Loop() {
		got := make(chan error, 1)
		var at time.Time
		go func() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "inbox", Arguments: map[string]any{"wait_seconds": 30, "mark_read": true}})
			at = time.Now()
			if err == nil && res.IsError {
				err = fmt.Errorf("inbox: %v", res.Content)
			}
			got <- err
		}()
		time.Sleep(2 * time.Millisecond) // let the call wait
		if _, err := ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"bob"}, Body: "hand-over"}); err != nil {
			b.Fatal(err)
		}
		sent := time.Now()
		if err := <-got; err != nil {
			b.Fatal(err)
		}
		lats = append(lats, max(0, at.Sub(sent)))
	}
	slices.Sort(lats)
	if n := len(lats); n > 0 {
		b.ReportMetric(float64(lats[n/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lats[min(n-1, n*99/100)].Microseconds()), "p99-µs")
	}
}
