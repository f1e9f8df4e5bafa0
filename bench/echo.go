package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// echoServer starts a bare net/http server on a listener of kind via
// ("tcp" on loopback or "unix"), whose one handler does what a served W1
// write does minus the server's framework and the store: it decodes the
// request body as the API's artifact change, decodes its content, and
// answers the artifact's metadata as the API answers a write. It
// returns the DSN-shaped address the echo children dial and a stop.
func echoServer(via string) (string, func(), error) {
	var (
		ln   net.Listener
		addr string
		dir  string
		err  error
	)
	switch via {
	case "unix":
		// A socket's path must fit in 108 bytes.
		if dir, err = os.MkdirTemp("", "echo"); err != nil {
			return "", nil, err
		}
		sock := filepath.Join(dir, "e.sock")
		ln, err = net.Listen("unix", sock)
		addr = "http+unix://" + sock
	default:
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			addr = "http://" + ln.Addr().String()
		}
	}
	if err != nil {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(echoHandler), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return addr, func() {
		_ = srv.Close()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}, nil
}

// echoHandler answers an artifact change with the artifact it would make.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	var body wire.ArtifactChangeBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := body.Content.Bytes()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	sum := sha256.Sum256(c)
	a := workspace.Artifact{ID: "01a21578-c89f-712d-b293-5bf3fbf9cac2", Name: strings.TrimPrefix(r.URL.Path, "/v1/artifacts/"), Kind: "output",
		Version: body.IfVersion + 1, ContentType: "application/octet-stream", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(c)),
		Owner: body.Actor, CreatedAt: now, CreatedBy: body.Actor, UpdatedAt: now, UpdatedBy: body.Actor}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// echoOp is W1's request against the echo server at addr, at c=1: the
// same JSON body the remote backend sends (1 KiB of random content, so
// base64), and the answer decoded as the remote backend decodes it.
func echoOp(addr string) op {
	client, base := echoClient(addr)
	content := make([]byte, 1024)
	_, _ = rand.Read(content)
	s := base64.StdEncoding.EncodeToString(content)
	var version int64 = 1
	return plain(func(ctx context.Context, _ int) error {
		body, err := json.Marshal(wire.ArtifactChangeBody{WriteFields: wire.WriteFields{Actor: actor, IfVersion: version},
			Content: wire.Content{Content: &s, ContentEncoding: "base64"}})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, base+"/v1/artifacts/echo", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("echo: %s: %s", resp.Status, b)
		}
		var a workspace.Artifact
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			return err
		}
		if a.Size != int64(len(content)) {
			return errors.New("echo: the answer has the wrong size")
		}
		version = a.Version
		return nil
	})
}

// echoClient is an HTTP client for addr (http://HOST:PORT or
// http+unix://PATH) and the base URL to put before paths.
func echoClient(addr string) (*http.Client, string) {
	if sock, ok := strings.CutPrefix(addr, "http+unix://"); ok {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		return &http.Client{Transport: tr}, "http://unix"
	}
	return &http.Client{}, addr
}
