package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/internal/rawsock"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// ParamToken is the DSN parameter that carries the bearer token.
const ParamToken = "ws_token"

// RetryFor bounds how long a retryable request (a GET, or a write with an
// idempotency key) is retried after connection errors and 503 unavailable answers.
const RetryFor = 15 * time.Second

// maxErrorBody caps how much of an error answer is read.
const maxErrorBody = 1 << 20

// ErrRemoteArchive is what Export and Import answer: an archive is read
// from or written to the store itself (open it by its own DSN), not
// through a server.
var ErrRemoteArchive = &workspace.InvalidError{Field: "workspace", Reason: "export and import need the store itself: run them with the store's DSN, not a server's"}

func init() {
	for _, s := range []string{"http", "https", "http+unix"} {
		driver.Register(s, backend{})
	}
}

type backend struct{}

// Params lists the token parameter, the remote backend's own.
func (backend) Params() []string { return []string{ParamToken} }

// Open builds a client for cfg's server and checks, with one request,
// that the server answers and accepts the token.
func (backend) Open(ctx context.Context, cfg driver.Config, opts workspace.Options) (*workspace.Workspace, error) {
	c, err := newClient(cfg, opts)
	if err != nil {
		return nil, err
	}
	var who struct {
		Actor string `json:"actor"`
	}
	// No retry: a server that is not there says so at Open, at once.
	if err := c.callRetry(ctx, http.MethodGet, "/v1/whoami", nil, nil, &who, false); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c.ws(), nil
}

// Client is a handle on a served workspace. It is safe for concurrent use;
// its requests share one pool of connections.
type Client struct {
	base      string // scheme://host[/prefix], no trailing slash
	token     string
	http      *http.Client // requests with an answer
	stream    *http.Client // event streams
	transport *http.Transport
	direct    *directTransport // http+unix only: http's transport
	opts      workspace.Options

	// life ends on Close: long polls and streams end with it.
	life   context.Context
	stop   context.CancelFunc
	closed sync.Once
	// mu orders track against Close: no stream is added to subs once
	// Close has begun waiting for them.
	mu   sync.Mutex
	subs sync.WaitGroup
}

// ws makes the user's handle of c.
func (c *Client) ws() *workspace.Workspace { return wsconn.Wrap(c) }

func newClient(cfg driver.Config, opts workspace.Options) (*Client, error) {
	u, err := url.Parse(cfg.DSN)
	if err != nil {
		return nil, &workspace.InvalidError{Field: "dsn", Reason: "not a URL"}
	}
	if len(u.Query()) > 0 {
		return nil, &workspace.InvalidError{Field: "dsn", Reason: "a server's DSN takes only ws_ parameters"}
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	base := ""
	var direct *directTransport
	switch cfg.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, &workspace.InvalidError{Field: "dsn", Reason: "names no host"}
		}
		base = cfg.Scheme + "://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/")
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return rawsock.Dial(ctx, d, network, addr)
		}
	case "http+unix":
		sock := u.Path
		if u.Host != "" || sock == "" {
			return nil, &workspace.InvalidError{Field: "dsn", Reason: "want http+unix:///path/to.sock"}
		}
		base = "http://unix"
		tr.Proxy = nil
		d := &net.Dialer{Timeout: 10 * time.Second}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return rawsock.Dial(ctx, d, "unix", sock)
		}
		direct = &directTransport{
			dial:    func(ctx context.Context) (net.Conn, error) { return rawsock.Dial(ctx, d, "unix", sock) },
			idleFor: 30 * time.Second,
		}
	default:
		return nil, &workspace.InvalidError{Field: "dsn", Reason: fmt.Sprintf("scheme %q is not a server's", cfg.Scheme)}
	}
	c := &Client{
		base:      base,
		token:     cfg.Params[ParamToken],
		transport: tr,
		direct:    direct,
		opts:      opts.WithDefaults(),
	}
	// A redirect is never an answer of ours; following one would send the
	// token elsewhere.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.stream = &http.Client{Transport: tr, CheckRedirect: noRedirect}
	c.http = c.stream
	if direct != nil {
		c.http = &http.Client{Transport: direct, CheckRedirect: noRedirect}
	}
	c.life, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// Close ends the client's subscriptions (with workspace.ErrClosed) and long
// polls, waits for their goroutines, and drops idle connections. Closing
// twice is harmless.
func (c *Client) Close() error {
	c.closed.Do(func() {
		c.mu.Lock()
		c.stop()
		c.mu.Unlock()
		c.subs.Wait()
		c.transport.CloseIdleConnections()
		if c.direct != nil {
			c.direct.CloseIdleConnections()
		}
	})
	return nil
}

func (c *Client) isClosed() bool { return c.life.Err() != nil }

// Artifacts, Tasks, Notes, Locks and Events return the client's facets.
func (c *Client) Artifacts() workspace.Artifacts { return artifacts{c} }

// Tasks returns the task facet.
func (c *Client) Tasks() workspace.Tasks { return tasks{c} }

// Notes returns the note facet.
func (c *Client) Notes() workspace.Notes { return notes{c} }

// Locks returns the lock facet.
func (c *Client) Locks() workspace.Locks { return locks{c} }

// Events returns the event facet.
func (c *Client) Events() workspace.Events { return events{c} }

// Status returns the dashboard.
func (c *Client) Status(ctx context.Context) (workspace.Status, error) {
	var st workspace.Status
	err := c.call(ctx, http.MethodGet, "/v1/status", nil, nil, &st)
	return st, err
}

// Export answers ErrRemoteArchive: see the package comment.
func (c *Client) Export(context.Context, io.Writer, workspace.ArchiveOptions) (workspace.ArchiveStats, error) {
	return workspace.ArchiveStats{}, ErrRemoteArchive
}

// Import answers ErrRemoteArchive: see the package comment.
func (c *Client) Import(context.Context, io.Reader, workspace.ArchiveOptions) (workspace.ImportReport, error) {
	return workspace.ImportReport{}, ErrRemoteArchive
}

// Attach returns another client on the same server, with the same token,
// which closes on its own.
func (c *Client) Attach() (*workspace.Workspace, error) {
	if c.isClosed() {
		return nil, workspace.ErrClosed
	}
	n := &Client{base: c.base, token: c.token, http: c.http, stream: c.stream, transport: c.transport, opts: c.opts}
	n.life, n.stop = context.WithCancel(context.Background())
	return n.ws(), nil
}

// call sends one request and decodes its answer into out (unless nil or
// the answer is 204). An error answer is the typed error it carries.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	return c.callRetry(ctx, method, path, query, body, out, method == http.MethodGet)
}

// jsonAppender is a body that writes its own JSON, json.Marshal's bytes
// without its reflection (wire.ArtifactChangeBody, the request agents send
// most).
type jsonAppender interface{ AppendJSON(dst []byte) []byte }

// callRetry is call; with retry, connection errors and 503 unavailable
// answers are retried for up to RetryFor, which is safe for reads and for
// writes with an idempotency key.
func (c *Client) callRetry(ctx context.Context, method, path string, query url.Values, body, out any, retry bool) error {
	if c.isClosed() {
		return workspace.ErrClosed
	}
	var payload []byte
	if a, ok := body.(jsonAppender); ok {
		payload = a.AppendJSON(nil)
	} else if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	// A request ends with the client too, so that Close cuts long polls.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()

	var deadline time.Time
	backoff := 20 * time.Millisecond
	for {
		resp, err := c.send(ctx, method, path, query, payload)
		if err == nil && (!retry || resp.StatusCode != http.StatusServiceUnavailable) {
			defer resp.Body.Close()
			return decode(resp, out)
		}
		if err == nil {
			// 503: retried as a lost connection is when it says the store
			// (or server) is unavailable for now, with the backoff below,
			// which stays within the server's Retry-After.
			err = decode(resp, nil)
			_ = resp.Body.Close()
			if !errors.Is(err, workspace.ErrUnavailable) {
				return err
			}
		}
		if c.isClosed() {
			return workspace.ErrClosed
		}
		if ctx.Err() != nil {
			return err
		}
		if !retry {
			return unreachable(method, err)
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(RetryFor)
		}
		if time.Now().After(deadline) {
			return unreachable(method, err)
		}
		select {
		case <-ctx.Done():
			if c.isClosed() {
				return workspace.ErrClosed
			}
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// unreachable makes a request that found no server (a refused or lost
// connection, a timeout of the transport) an *workspace.UnavailableError,
// as every backend reports a store it cannot reach, so that callers (and
// wsctl's exit code) branch on workspace.ErrUnavailable. A write whose
// connection was lost after it was sent may have been applied: Unknown
// says so. Typed answers of the server and the caller's own cancellation
// pass through.
func unreachable(method string, err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	return &workspace.UnavailableError{Backend: "remote", Unknown: !notSent && method != http.MethodGet, Cause: err}
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, payload []byte) (*http.Response, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if p, ok := wsconn.PrincipalFrom(ctx); ok && p.Actor != "" {
		// Reads carry who they are for; a server without tokens takes it
		// from this header (a token's actor wins where there is one).
		req.Header.Set(wire.ActorHeader, p.Actor)
	}
	resp, err := c.do(req)
	if err != nil {
		// url.Error keeps the cause (a cancelled context, a refused
		// connection) for errors.Is; the URL holds no secret.
		return nil, err
	}
	return resp, nil
}

// do sends req with c.http. To a unix socket it calls the direct
// transport itself, doing what http.Client.Do does there: no redirect is
// followed (noRedirect), and an error is a *url.Error naming the method
// and the URL; but without the client's copy of the request's headers
// for redirects and its other bookkeeping, a tenth of a call's
// allocations.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	d, ok := c.http.Transport.(*directTransport)
	if !ok {
		return c.http.Do(req)
	}
	resp, err := d.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// decode reads an answer: out from a 2xx, the typed error of any other.
func decode(resp *http.Response, out any) error {
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return wire.DecodeError(resp.StatusCode, b)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := decodeBody(resp.Body, resp.ContentLength, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// decodeBody decodes an answer of n bytes (-1: unknown) into out. It reads
// the answer whole, then decodes it in one call: a workspace record or
// page decodes itself (its UnmarshalJSON checks its bytes as
// json.Unmarshal does), so it is handed the bytes directly, where a
// json.Decoder would first scan them once more to find where the value
// ends, and allocate its own buffer. The server answers exactly one JSON
// value and a newline.
func decodeBody(body io.Reader, n int64, out any) error {
	var b []byte
	if n > 0 && n <= maxPrealloc {
		b = make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return err
		}
	} else {
		var err error
		if b, err = io.ReadAll(body); err != nil {
			return err
		}
	}
	if u, ok := out.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(bytes.TrimRight(b, " \t\r\n"))
	}
	return json.Unmarshal(b, out)
}

// maxPrealloc bounds the buffer allocated up front for an answer of known
// length; a longer one is read as it comes.
const maxPrealloc = 4 << 20

// segment escapes one path segment: a "/" inside it as %2F, and a "." or
// ".." segment so that no one cleans it away. An empty segment would name
// another route: it is refused here as the field it is.
func segment(field, s string) (string, error) {
	if s == "" {
		return "", &workspace.InvalidError{Field: field, Reason: "must not be empty"}
	}
	switch s {
	case ".":
		return "%2E", nil
	case "..":
		return "%2E%2E", nil
	}
	return url.PathEscape(s), nil
}
