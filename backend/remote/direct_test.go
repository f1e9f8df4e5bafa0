package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingListener counts the connections a server accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// socketPath is a unix socket path short enough for the kernel's limit.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ws")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

// directServer serves h on a unix socket and returns a client on it with
// a direct transport, and the listener that counts its connections.
func directServer(t *testing.T, h http.Handler, idle time.Duration) (*http.Client, *countingListener) {
	t.Helper()
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle}
	go func() { _ = hs.Serve(cl) }()
	t.Cleanup(func() { _ = hs.Close() })
	var d net.Dialer
	tr := &directTransport{dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }, idleFor: time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, cl
}

// echo answers a request with its method and body.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	_, _ = fmt.Fprintf(w, "%s %s", r.Method, b)
})

func doText(t *testing.T, c *http.Client, ctx context.Context, method, body string) string {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://unix/x", rd)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestDirectTransportKeepsOneConnection(t *testing.T) {
	c, ln := directServer(t, echo, time.Minute)
	for i := range 50 {
		require.Equal(t, fmt.Sprintf("POST %d", i), doText(t, c, context.Background(), http.MethodPost, fmt.Sprint(i)))
		require.Equal(t, "GET ", doText(t, c, context.Background(), http.MethodGet, ""))
	}
	require.EqualValues(t, 1, ln.n.Load(), "one caller at a time needs one connection")
}

func TestDirectTransportNoticesAnIdleConnectionTheServerClosed(t *testing.T) {
	c, ln := directServer(t, echo, 20*time.Millisecond)
	require.Equal(t, "POST a", doText(t, c, context.Background(), http.MethodPost, "a"))
	// The server closes the connection after 20 ms idle; a POST without an
	// idempotency key may not be sent twice, so it must not be sent on it.
	require.Eventually(t, func() bool {
		tr := c.Transport.(*directTransport)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.idle) == 1 && !peerOpen(tr.idle[0].c)
	}, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, "POST b", doText(t, c, context.Background(), http.MethodPost, "b"))
	require.EqualValues(t, 2, ln.n.Load())
}

func TestDirectTransportCancelEndsAWaitAndDropsTheConnection(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	h.Handle("/x", echo)
	c, ln := directServer(t, h, time.Minute)
	require.Equal(t, "GET ", doText(t, c, context.Background(), http.MethodGet, ""))

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://unix/wait", nil)
	require.NoError(t, err)
	_, err = c.Do(req)
	require.ErrorIs(t, err, context.Canceled)

	require.Equal(t, "POST after", doText(t, c, context.Background(), http.MethodPost, "after"))
	require.EqualValues(t, 2, ln.n.Load(), "the cancelled call's connection is not reused")
}

func TestDirectTransportABodyClosedEarlyTakesItsConnection(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 1<<20)
	h := http.NewServeMux()
	h.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked")
		_, _ = w.Write(big)
	})
	h.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	h.Handle("/x", echo)
	c, ln := directServer(t, h, time.Minute)

	resp, err := c.Get("http://unix/big")
	require.NoError(t, err)
	var head [10]byte
	_, err = io.ReadFull(resp.Body, head[:])
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	// What was left of the big answer must not be read as the next one.
	require.Equal(t, "POST next", doText(t, c, context.Background(), http.MethodPost, "next"))

	resp, err = c.Get("http://unix/close")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "bye", string(b))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "POST last", doText(t, c, context.Background(), http.MethodPost, "last"))
	require.EqualValues(t, 3, ln.n.Load())
}

// TestDirectTransportSendsAgainOnlyWhatIsSafe serves each connection's
// first request and then reads the second and hangs up without an answer,
// as a server that crashed or closed the connection would: a GET and a
// write with an idempotency key are sent again on a new connection; a
// write without one is not (it may have been done) and reports the error.
func TestDirectTransportSendsAgainOnlyWhatIsSafe(t *testing.T) {
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var seen sync.Map // body -> times the server read it
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				br := bufio.NewReader(conn)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					n, _ := seen.LoadOrStore(req.Method+" "+string(b), new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					if i == 1 {
						return // read, and hung up on
					}
					resp := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, ContentLength: 2, Body: io.NopCloser(strings.NewReader("ok"))}
					if err := resp.Write(conn); err != nil {
						return
					}
				}
			}()
		}
	}()
	var d net.Dialer
	tr := &directTransport{dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }, idleFor: time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	times := func(key string) int64 {
		n, ok := seen.Load(key)
		if !ok {
			return 0
		}
		return n.(*atomic.Int64).Load()
	}
	send := func(method, body string, hdr map[string]string) error {
		req, err := http.NewRequest(method, "http://unix/x", strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}

	require.NoError(t, send(http.MethodPost, "first", nil))
	require.NoError(t, send(http.MethodGet, "", nil), "a GET goes again on a new connection")
	require.EqualValues(t, 2, times("GET "))

	require.NoError(t, send(http.MethodPost, "keyed", map[string]string{"Idempotency-Key": "k1"}), "a keyed write goes again")
	require.EqualValues(t, 2, times("POST keyed"))

	err = send(http.MethodPost, "unkeyed", nil)
	require.Error(t, err, "a write without a key is not sent twice")
	require.False(t, errors.Is(err, context.Canceled))
	require.EqualValues(t, 1, times("POST unkeyed"))
}
