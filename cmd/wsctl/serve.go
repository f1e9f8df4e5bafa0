package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentspace/agentspace/workspace/touch"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/internal/gcpace"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// Server timeouts: slow clients cannot hold a connection for ever. Event
// streams clear their read deadline (they have no body) and bound each
// write instead.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 2 * time.Minute
	serveIdleTimeout       = 2 * time.Minute
	serveMaxHeaderBytes    = 64 << 10
)

func (a *app) serveCmd() *cobra.Command {
	var (
		listen, tlsCert, tlsKey, logFormat, logLevel string
		requireToken                                 bool
		heartbeat, maxWait, drain, touchEvery        time.Duration
		gcEvery                                      time.Duration // see gc.go
		gcf                                          gcFlags
		allowedHosts                                 []string
		cpuProfile                                   string
		maxStreams                                   int
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the workspace over HTTP (/v1 API, SSE events, tokens)",
		Long: `serve answers the HTTP API of the workspace: /v1 (JSON; events as
Server-Sent Events at /v1/events), /v1/openapi.json, /healthz and /metrics.

--listen takes HOST:PORT or unix:/path/to.sock. On any address but a
loopback one or a unix socket, every request must present a token (see
'wsctl token create'); on those, a request without a token acts as the
actor it names (X-Agentspace-Actor or the body's actor), and one with a
token acts as the token's actor. A request whose Host is not the address
it reached (or, on loopback, 127.0.0.1, localhost or [::1] with its port)
is refused, and so is a write whose Origin is another site: a web page
cannot reach the server through DNS rebinding. Name each other host the
server is reached by (a proxy's, a DNS name) with --allowed-host.
SIGTERM or Ctrl-C drains: event streams end (clients resume with
Last-Event-ID), requests under way finish.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			// main cancels ctx on these signals too; serve listens itself so
			// that it drains wherever run is called from.
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if (tlsCert == "") != (tlsKey == "") {
				return usageErrorf("--tls-cert and --tls-key go together")
			}
			if maxStreams < 1 {
				return usageErrorf("--max-streams-per-token %d: want at least 1", maxStreams)
			}
			logger, err := a.serverLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			// A serving process's GC pace, unless GOGC is set (gcpace).
			defer gcpace.Serve()()
			network, addr, loopback, err := listenAddr(listen)
			if err != nil {
				return err
			}
			res, err := a.resolve()
			if err != nil {
				return err
			}
			a.dsn = res.DSN
			var maxSize int64
			if p, err := driver.ParseDSN(res.DSN); err == nil {
				maxSize = p.Options.MaxArtifactSize
			}
			ws, err := workspace.Open(ctx, res.DSN, workspace.Options{Logger: logger, MustExist: true})
			if err != nil {
				return err
			}
			defer ws.Close()
			stopGC, err := a.scheduleGC(ctx, cmd, ws, gcEvery, gcf, logger)
			if err != nil {
				return err
			}
			defer stopGC()
			dsn := res.DSN
			srv, err := server.New(ws, server.Options{
				RequireToken:       requireToken || !loopback,
				MaxArtifactSize:    maxSize,
				Heartbeat:          heartbeat,
				MaxWait:            maxWait,
				Logger:             logger,
				Redact:             func(err error) error { return driver.RedactError(err, dsn) },
				Version:            readBuildInfo().Version,
				MCP:                mcpEndpoint,
				AllowedHosts:       allowedHosts,
				TouchEvery:         touchEvery,
				MaxStreamsPerToken: maxStreams,
			})
			if err != nil {
				return err
			}
			return a.runHTTP(ctx, srv, httpParams{
				name: "serve", network: network, addr: addr, tlsCert: tlsCert, tlsKey: tlsKey,
				drain: drain, logger: logger,
				ready: func(ln net.Listener) {
					scheme := "http"
					if tlsCert != "" {
						scheme = "https"
					}
					where := scheme + "://" + ln.Addr().String()
					if network == "unix" {
						where = "http+unix://" + addr
					}
					mode := "every request needs a token"
					if !(requireToken || !loopback) {
						mode = "serving WITHOUT requiring tokens (loopback or unix socket only): a request acts as the actor it names; a presented token still binds its actor"
					}
					fmt.Fprintf(a.stderr, "wsctl serve: %s on %s for %s\n", mode, where, workspace.RedactDSN(res.DSN))
				},
			})
		}),
	}
	f := c.Flags()
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the server's whole run to this file (written when it stops)")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&listen, "listen", "127.0.0.1:7465", "HOST:PORT, or unix:/path/to.sock")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM), with --tls-key")
	f.StringVar(&tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	f.BoolVar(&requireToken, "require-token", false, "require a token on every request, even on loopback")
	f.DurationVar(&heartbeat, "heartbeat", server.DefaultHeartbeat, "how often an idle event stream sends a heartbeat")
	f.DurationVar(&maxWait, "max-wait", server.DefaultMaxWait, "the longest a claim or lock long poll waits")
	f.IntVar(&maxStreams, "max-streams-per-token", server.DefaultMaxStreamsPerToken, "the most event streams one token keeps open on this server (one more is 429 too_many)")
	f.DurationVar(&drain, "drain-timeout", 30*time.Second, "how long SIGTERM waits for requests under way")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug (one line per request), info, warn or error")
	f.DurationVar(&touchEvery, "touch-every", touch.DefaultEvery, "each request renews its actor's claims and leases, at most this often per actor (0: off); see docs/agents.md")
	f.StringArrayVar(&allowedHosts, "allowed-host", nil, "a further Host the server answers to: NAME (any port) or NAME:PORT; repeatable")
	f.DurationVar(&gcEvery, "gc-every", 0, "run gc with the retention policy this often (0: never)")
	gcf.add(c)
	return c
}

// httpParams says where and how runHTTP serves.
type httpParams struct {
	name            string // the command, for messages: "serve", "dashboard"
	network, addr   string // as listenAddr returns them
	tlsCert, tlsKey string // PEM files; HTTPS when set
	drain           time.Duration
	logger          *slog.Logger
	ready           func(ln net.Listener) // says where it serves, once it listens
}

// runHTTP is the HTTP server of wsctl serve and wsctl dashboard: it
// listens, calls p.ready, serves srv with the server timeouts until ctx
// ends, then drains (event streams end, requests under way finish) for up
// to p.drain.
func (a *app) runHTTP(ctx context.Context, srv *server.Server, p httpParams) error {
	ln, err := listenOn(p.network, p.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(srv.Drain)
	p.ready(ln)
	errc := make(chan error, 1)
	go func() {
		if p.tlsCert != "" {
			errc <- hs.ServeTLS(ln, p.tlsCert, p.tlsKey)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(a.stderr, "wsctl %s: draining\n", p.name)
	sctx, cancel := context.WithTimeout(context.Background(), p.drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("%s: shutdown: %w", p.name, err)
	}
	// Event streams that took their connections over are not Shutdown's:
	// the Drain it started ends them, and waits (a second call returns
	// once the first has) until their last records are written or cut
	// off, within a second.
	srv.Drain()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintf(a.stderr, "wsctl %s: stopped\n", p.name)
	return nil
}

func (a *app) serverLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(a.stderr, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(a.stderr, o)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

// listenAddr parses --listen and says whether it is loopback-only (a
// loopback IP, localhost, or a unix socket).
func listenAddr(s string) (network, addr string, loopback bool, err error) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if path == "" {
			return "", "", false, usageErrorf("--listen %q: want unix:/path/to.sock", s)
		}
		return "unix", path, true, nil
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return "", "", false, usageErrorf("--listen %q: want HOST:PORT or unix:/path/to.sock", s)
	}
	if host == "localhost" {
		return "tcp", s, true, nil
	}
	ip := net.ParseIP(host)
	return "tcp", s, ip != nil && ip.IsLoopback(), nil
}

// listenPrivate listens on the unix socket addr, which only its owner may
// connect to: without tokens, whoever can reach the socket can act as
// anyone. The socket is made in a new directory only the owner can enter,
// made 0600 there, and only then renamed to addr, so that at no moment
// can another user connect to it, whatever the umask.
func listenPrivate(addr string) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(addr), ".wsctl-socket-")
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // it is unlinked at addr, below
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("serve: %w", err)
	}
	if err := os.Rename(tmp, addr); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("serve: %w", err)
	}
	return unlinkOnClose{UnixListener: ul, path: addr}, nil
}

// unlinkOnClose removes its socket's path when it closes, as a unix
// listener does for the path it was made at.
type unlinkOnClose struct {
	*net.UnixListener
	path string
}

// Close closes the listener and removes its socket.
func (l unlinkOnClose) Close() error {
	err := l.UnixListener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// listenOn opens the listener. A unix socket left by a server that died is
// removed; one that answers is in use; anything else at the path (a
// regular file, a directory, a link) is never removed.
func listenOn(network, addr string) (net.Listener, error) {
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil {
			if fi.Mode().Type() != os.ModeSocket {
				return nil, fmt.Errorf("serve: %s exists and is not a socket: remove it or choose another path", addr)
			}
			if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
				_ = c.Close()
				return nil, fmt.Errorf("serve: %s: a server is listening there already", addr)
			}
			if err := os.Remove(addr); err != nil {
				return nil, fmt.Errorf("serve: %w", err)
			}
		}
		return listenPrivate(addr)
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return ln, nil
}
