package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// wsctlEnv runs wsctl in-process with the given environment.
func wsctlEnv(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

// TestWsctlThroughServeWithAToken: AGENTSPACE_TOKEN reaches the server as
// the DSN's ws_token; writes need no --as and act as the token's actor;
// naming another actor is refused; a bad token is refused without being
// echoed.
func TestWsctlThroughServeWithAToken(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	tok, errOut, code := wsctl(t, dsn, "token", "create", "--actor", "ann")
	require.Equal(t, 0, code, errOut)
	tok = strings.TrimSpace(tok)
	_, url, _ := startServe(t, dsn, "--listen", "127.0.0.1:0")

	env := map[string]string{"AGENTSPACE_DSN": url, "AGENTSPACE_TOKEN": tok}
	_, errOut, code = wsctlEnv(t, env, "note", "put", "decision", "db", "--title", "DB", "--body", "postgres")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := wsctlEnv(t, env, "--json", "note", "get", "decision", "db")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"author": "ann"`)

	_, errOut, code = wsctlEnv(t, env, "--as", "bob", "note", "put", "decision", "db2", "--title", "x", "--body", "x")
	assert.Equal(t, exitForbidden, code, "writing as another actor is forbidden: %s", errOut)
	assert.Contains(t, errOut, "forbidden")
	assert.NotContains(t, errOut, "policy", "the token refused it, and there is no policy: no hint about one")

	bad := tok[:len(tok)-4] + "aaaa"
	_, errOut, code = wsctlEnv(t, map[string]string{"AGENTSPACE_DSN": url, "AGENTSPACE_TOKEN": bad}, "note", "ls")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "unauthorized")
	assert.NotContains(t, errOut, bad[21:], "the token is never echoed")

	_, errOut, code = wsctlEnv(t, env, "export", "-o", filepath.Join(t.TempDir(), "a.jsonl"))
	assert.Equal(t, 2, code, "export needs the store itself")
	assert.Contains(t, errOut, "store's DSN")
}

// TestKilledServerLosesNoAcknowledgedWrite: 8 clients write with
// idempotency keys and 2 follow the log through a real `wsctl serve`,
// which is SIGKILLed and started again on the same address. Every write a
// client saw acknowledged is there exactly once, and the followers resume
// without a gap or a duplicate. On TCP the client uses net/http's
// transport; on a unix socket its own (backend/remote's directTransport).
func TestKilledServerLosesNoAcknowledgedWrite(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		// A fixed address, so that the restarted server is where the
		// clients look: take a free port and give it back.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		killServerWhileWriting(t, addr)
	})
	t.Run("unix", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "ws")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		// The killed server leaves its socket file; the next one takes
		// the path over.
		killServerWhileWriting(t, "unix:"+filepath.Join(dir, "s.sock"))
	})
}

func killServerWhileWriting(t *testing.T, addr string) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, store, "init")
	require.Equal(t, 0, code, errOut)
	srv, url, _ := startServe(t, store, "--listen", addr)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, followers = 8, 2
	stopWriting := make(chan struct{})
	var (
		mu    sync.Mutex
		acked = map[string]int{} // note key -> acknowledgements
		wg    sync.WaitGroup
	)
	for w := range writers {
		ws, err := workspace.Open(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopWriting:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				// The client retries a keyed write after a connection
				// error; a write that still fails (the server was down
				// for longer) is retried here with the same key.
				for {
					_, err := ws.Notes().Put(ctx, workspace.Write{Actor: fmt.Sprintf("w%d", w), IdempotencyKey: key}, workspace.NotePut{Kind: "decision", Key: key})
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
				}
				mu.Lock()
				acked[key]++
				mu.Unlock()
			}
		}()
	}
	// Each follower keeps the seqs it was given.
	type follower struct {
		mu   sync.Mutex
		seqs []int64
	}
	fs := make([]*follower, followers)
	for f := range followers {
		ws, err := workspace.Open(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Close() })
		fs[f] = &follower{}
		go func() {
			for m := range sub.C() {
				fs[f].mu.Lock()
				fs[f].seqs = append(fs[f].seqs, m.Event.Seq)
				fs[f].mu.Unlock()
			}
		}()
	}

	time.Sleep(500 * time.Millisecond)
	require.NoError(t, srv.Process.Signal(syscall.SIGKILL))
	_ = srv.Wait()
	time.Sleep(200 * time.Millisecond)
	startServe(t, store, "--listen", addr)
	time.Sleep(500 * time.Millisecond)
	close(stopWriting)
	wg.Wait()

	ws, err := workspace.Open(ctx, url)
	require.NoError(t, err)
	defer ws.Close()
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 10000})
	require.NoError(t, err)
	require.Equal(t, head, page.Next, "one page holds the whole log")
	written := map[string]int{}
	for _, e := range page.Events {
		if e.Type == workspace.EventNotePut {
			written[e.Subject.Name]++
		}
	}
	require.NotEmpty(t, acked)
	for key, n := range acked {
		assert.Equal(t, 1, n, "%s acknowledged once", key)
		assert.Equal(t, 1, written[key], "%s written exactly once", key)
	}

	for f, fl := range fs {
		require.Eventually(t, func() bool {
			fl.mu.Lock()
			defer fl.mu.Unlock()
			return len(fl.seqs) > 0 && fl.seqs[len(fl.seqs)-1] >= head
		}, 30*time.Second, 10*time.Millisecond, "follower %d reaches the head", f)
		fl.mu.Lock()
		want := make([]int64, head)
		for i := range want {
			want[i] = int64(i + 1)
		}
		assert.Equal(t, want, fl.seqs, "follower %d: every event once, in order, across the restart", f)
		fl.mu.Unlock()
	}
}

// TestGCAndVerifyThroughAServer: wsctl verify and gc against a server's
// DSN do what they do on the store (the server runs them), with the same
// output.
func TestGCAndVerifyThroughAServer(t *testing.T) {
	dsn := serveStore(t, true)
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		_, errOut, code := wsctl(t, dsn, "--as", "alice", "note", "put", "decision", key)
		require.Equal(t, 0, code, errOut)
	}
	out, errOut, code := wsctl(t, dsn, "verify")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^events 1-6: 6 links checked$`, out)
	out, errOut, code = wsctl(t, dsn, "--as", "alice", "gc", "--dry-run", "--keep-events", "2")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^events: would remove 4 \([0-9]+ bytes\), floor 1 -> 5`, out)
	out, errOut, code = wsctl(t, dsn, "--as", "alice", "gc", "--keep-events", "2", "--batch", "3")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^events: removed 4 \([0-9]+ bytes\), floor 1 -> 5 in 2 batches .*recorded as event 7`, out)
	out, errOut, code = wsctl(t, dsn, "verify", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"floor": 5`)
	assert.Contains(t, out, `"events": 3`)
	_, errOut, code = wsctl(t, dsn, "--as", "alice", "gc", "--keep-events", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "keep events")
}
