package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// benchInboxSizes are the store sizes the inbox benchmarks run at, in
// messages (each one event): AGENTSPACE_BENCH_INBOX_SIZES overrides
// them ("10000,1000000").
func benchInboxSizes() []int {
	sizes := []int{10_000, 100_000}
	if s := os.Getenv("AGENTSPACE_BENCH_INBOX_SIZES"); s != "" {
		sizes = nil
		for _, f := range splitComma(s) {
			n, err := strconv.Atoi(f)
			if err == nil && n > 0 {
				sizes = append(sizes, n)
			}
		}
	}
	return sizes
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// benchInboxStore is a SQLite store holding n messages to "me", sent in
// batches of 1,000, and the ids of the first, middle and last.
func benchInboxStore(b *testing.B, dsnFor func(b *testing.B) string, n int) (*workspace.Workspace, []string) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsnFor(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ws.Close() })
	if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "me"}, workspace.NotePut{Kind: "hello", Key: "me", Body: "me"}); err != nil {
		b.Fatal(err)
	}
	var ids []string
	for sent := 0; sent < n; {
		batch := workspace.Batch{Actor: "boss"}
		for i := 0; i < 1000 && sent < n; i++ {
			batch.Ops = append(batch.Ops, workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{"me"}, Body: fmt.Sprint("message ", sent)}})
			sent++
		}
		r, err := ws.Commit(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range r.Results {
			if sent <= 1000 || sent == n || (sent > n/2 && sent <= n/2+1000) {
				ids = append(ids, o.Msg.ID)
			}
		}
	}
	return ws, ids
}

// BenchmarkInboxScale reads an inbox, its counts and a long poll's wake
// at each store size: their figures at 1,000,000 messages are to stay
// within 1.3x of those at 10,000.
//
//	go test ./workspace/engine -run '^$' -bench InboxScale -benchtime 2000x
func BenchmarkInboxScale(b *testing.B) {
	sqlite := func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "ws.db") }
	for _, n := range benchInboxSizes() {
		b.Run(fmt.Sprintf("sqlite/n=%d", n), func(b *testing.B) { benchInboxAt(b, sqlite, n) })
	}
	// PostgreSQL when a test server is named (AGENTSPACE_TEST_POSTGRES).
	if os.Getenv("AGENTSPACE_TEST_POSTGRES") == "" {
		return
	}
	for _, n := range benchInboxSizes() {
		b.Run(fmt.Sprintf("postgres/n=%d", n), func(b *testing.B) { benchInboxAt(b, func(b *testing.B) string { return pgtest.NewDSN(b) }, n) })
	}
}

func benchInboxAt(b *testing.B, dsnFor func(b *testing.B) string, n int) {
	ctx := context.Background()
	ws, ids := benchInboxStore(b, dsnFor, n)
	mid := ids[len(ids)/2]
	read := func(b *testing.B, q workspace.InboxQuery) {
		for b.Loop() {
			p, err := ws.Messages().Inbox(ctx, q)
			if err != nil || len(p.Messages) == 0 {
				b.Fatal(err, len(p.Messages))
			}
		}
	}
	b.Run("first-page", func(b *testing.B) { read(b, workspace.InboxQuery{Actor: "me", Limit: 20}) })
	b.Run("page-after-middle", func(b *testing.B) { read(b, workspace.InboxQuery{Actor: "me", After: mid, Limit: 20}) })
	// The cursor 100 short of the last message: the unread count and page.
	if err := ws.Messages().MarkRead(ctx, "me", ids[len(ids)-101]); err != nil {
		b.Fatal(err)
	}
	b.Run("unread-count", func(b *testing.B) { read(b, workspace.InboxQuery{Actor: "me", Unread: true, Limit: 1}) })
	b.Run("wake-1000-waiters", func(b *testing.B) { benchWake(b, ws, 1000) })
}

// benchWake: waiters long polls wait on their own inboxes; each op sends
// one of them a message and waits until its poll returns it.
func benchWake(b *testing.B, ws *workspace.Workspace, waiters int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := make([]string, waiters)
	got := make([]chan string, waiters)
	for i := range names {
		names[i] = fmt.Sprintf("w%04d", i)
		got[i] = make(chan string, 1)
		// A recipient is one that has written.
		if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: names[i]}, workspace.NotePut{Kind: "hello", Key: names[i], Body: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	for i, name := range names {
		go func() {
			after := ""
			for ctx.Err() == nil {
				p, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: name, After: after, Wait: true, Limit: 1})
				if err != nil || len(p.Messages) == 0 {
					continue
				}
				after = p.Messages[0].ID
				got[i] <- after
			}
		}()
	}
	i := 0
	for b.Loop() {
		m, err := ws.Messages().Send(ctx, workspace.Write{Actor: "boss"}, workspace.NewMsg{To: []string{names[i]}, Body: "wake"})
		if err != nil {
			b.Fatal(err)
		}
		if id := <-got[i]; id != m.ID {
			b.Fatalf("%s got %s, not %s", names[i], id, m.ID)
		}
		i = (i + 1) % waiters
	}
}
