package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// remoteScripts are the scripts of testdata/script that run unchanged
// against a served workspace. The others need the store itself: archive
// (export and import), migrate (schema migrations), and noworkspace and
// completion (which start on a DSN that names no store; a server always
// serves one).
var remoteScripts = []string{"artifact", "events", "lock", "note", "recipe", "status", "task"}

// serveStore starts a server (in this process, on a real listener: the
// scripts' wsctl runs as another process) in front of a fresh SQLite
// store, and returns its DSN; unix picks a unix socket over loopback TCP.
func serveStore(t *testing.T, unix bool) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ws")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ws, err := workspace.Open(context.Background(), "sqlite:"+filepath.Join(dir, "ws.db"))
	require.NoError(t, err)
	srv, err := server.New(ws, server.Options{MaxWait: time.Second})
	require.NoError(t, err)
	var ln net.Listener
	dsn := ""
	if unix {
		sock := filepath.Join(dir, "s.sock")
		ln, err = net.Listen("unix", sock)
		dsn = "http+unix://" + sock
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			dsn = "http://" + ln.Addr().String()
		}
	}
	require.NoError(t, err)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Drain)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		_ = ws.Close()
	})
	return dsn
}

// TestScriptsThroughAServer runs the scripts that apply to a served
// workspace with --dsn http://…: the same commands, outputs and exit codes
// as on a local store. Over http+unix://, which differs only in how the
// client dials, it runs one of them (artifact): the unix dialer's own
// cases are TestServeOnAUnixSocket's and backend/remote's.
func TestScriptsThroughAServer(t *testing.T) {
	t.Parallel()
	requireScheme(t, "http")
	requireScheme(t, "http+unix")
	for _, tr := range []struct {
		name    string
		scripts []string
	}{{"tcp", remoteScripts}, {"unix", []string{"artifact"}}} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testscript.Run(t, scriptParams(scriptsDir(t, tr.scripts...), func(string, string) string { return serveStore(t, tr.name == "unix") }))
		})
	}
}
