package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// proxy forwards TCP connections to target until cut: then it drops every
// connection and refuses new ones until resumed, as a restarting server does.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
	}
}

// cut drops every connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestFollowSurvivesALostConnection runs `wsctl events --follow` through a
// proxy to PostgreSQL, cuts every connection (as a server restart does),
// writes while the tail is cut off, and requires the tail to print every
// event exactly once, in order.
func TestFollowSurvivesALostConnection(t *testing.T) {
	dsn := pgtest.NewDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	p := startProxy(t, u.Host)
	u.Host = p.ln.Addr().String()

	var stderrBuf syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wsctl's stderr:\n%s", stderrBuf.String())
		}
	})
	const total = 6
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		done <- run(ctx, []string{"--dsn", u.String(), "events", "--follow", "--after", "0", "--limit", "6", "--json"},
			nil, pw, &stderrBuf, func(string) string { return "" })
	}()
	lines := bufio.NewScanner(pr)
	next := func() workspace.Event {
		t.Helper()
		require.True(t, lines.Scan(), "the tail ended early: %v", lines.Err())
		var ev workspace.Event
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
		return ev
	}
	note := func(key string) {
		t.Helper()
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "writer"}, workspace.NotePut{Kind: "decision", Key: key, Body: key})
		require.NoError(t, err)
	}

	note("a")
	note("b")
	assert.Equal(t, int64(1), next().Seq)
	assert.Equal(t, int64(2), next().Seq)

	p.cut()
	note("c")
	note("d")
	p.resume()
	note("e")
	note("f")
	for want := int64(3); want <= total; want++ {
		assert.Equal(t, want, next().Seq)
	}
	assert.Equal(t, exitOK, <-done)
	assert.False(t, lines.Scan(), "nothing after the limit")
}

type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
