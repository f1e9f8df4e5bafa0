package remote_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// A server that is not there, or a connection lost under a write, is a
// *workspace.UnavailableError (ErrUnavailable, wsctl's exit 75), as every
// backend reports a store it cannot reach, not a raw transport error; a
// write lost after it was sent says its outcome is unknown.
func TestAServerNotThereOrLostIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = workspace.Open(ctx, "http://"+addr)
	var ue *workspace.UnavailableError
	require.ErrorAs(t, err, &ue, "nothing listens: %v", err)
	assert.ErrorIs(t, err, workspace.ErrUnavailable)
	assert.Equal(t, "remote", ue.Backend)
	assert.False(t, ue.Unknown, "a refused connection sent nothing")

	// A front that passes reads to a real server and drops the
	// connection of every write once it has read it.
	real, err := url.Parse(serve(t, sqliteDSN(t), false, server.Options{}))
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(real) }}
	front, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			proxy.ServeHTTP(w, r)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})}
	go func() { _ = srv.Serve(front) }()
	t.Cleanup(func() { _ = srv.Close() })

	ws, err := workspace.Open(ctx, "http://"+front.Addr().String())
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "k", Body: "x"})
	require.ErrorAs(t, err, &ue, "the write's connection was dropped: %v", err)
	assert.True(t, ue.Unknown, "a write lost after it was sent may have been applied")
}
