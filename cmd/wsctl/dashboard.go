package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

func (a *app) dashboardCmd() *cobra.Command {
	var (
		listen       string
		open         bool
		requireToken bool
		allowedHosts []string
	)
	c := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the live web dashboard on loopback and print its URL",
		Long: `dashboard serves the workspace's web dashboard (the task board, locks,
the event feed, artifacts, notes and agents, all following live) and the
HTTP API of 'wsctl serve', on a loopback address only. It prints the URL;
--open also opens it in the default browser.

Without a token, everything it serves is read-only: the pages, and the
/v1 API's reads and event stream. Every /v1 write and /mcp without a token
is refused (403 forbidden), so no local user can write through it as
whichever actor they name. A request with a token acts as the token's
actor: the pages' actions need a token whose role is admin ('wsctl token
create --role admin'), or the policy's leave, to release a lock, requeue
a stuck task or retry a failed one, each recorded as that token's actor.
--require-token makes every page and request need a token, as 'wsctl
serve --require-token' does. To serve it to other hosts, use 'wsctl serve
--listen', where every page needs a token. Only a request naming the dashboard by its
loopback address (127.0.0.1, localhost or [::1] with its port) or an
--allowed-host is answered: a web page cannot reach it through DNS
rebinding. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			network, addr, loopback, err := listenAddr(listen)
			if err != nil {
				return err
			}
			if !loopback || network != "tcp" {
				return usageErrorf("--listen %q: the dashboard listens on a loopback HOST:PORT only; use 'wsctl serve --listen' (with tokens) for others", listen)
			}
			res, err := a.resolve()
			if err != nil {
				return err
			}
			a.dsn = res.DSN
			logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ws, err := workspace.Open(ctx, res.DSN, workspace.Options{Logger: logger, MustExist: true})
			if err != nil {
				return err
			}
			defer ws.Close()
			dsn := res.DSN
			srv, err := server.New(ws, server.Options{
				RequireToken: requireToken,
				ReadOnly:     true,
				Logger:       logger,
				Redact:       func(err error) error { return driver.RedactError(err, dsn) },
				Version:      readBuildInfo().Version,
				AllowedHosts: allowedHosts,
				MCP:          mcpEndpoint,
			})
			if err != nil {
				return err
			}
			return a.runHTTP(ctx, srv, httpParams{
				name: "dashboard", network: network, addr: addr, drain: 5 * time.Second, logger: logger,
				ready: func(ln net.Listener) {
					url := "http://" + ln.Addr().String() + "/"
					fmt.Fprintln(a.stdout, url)
					mode := "read-only without a token"
					if requireToken {
						mode = "every request needs a token"
					}
					fmt.Fprintf(a.stderr, "wsctl dashboard: %s on %s, %s (Ctrl-C stops it)\n", workspace.RedactDSN(res.DSN), url, mode)
					if open {
						if err := openBrowser(url); err != nil {
							fmt.Fprintf(a.stderr, "wsctl dashboard: could not open a browser (%v): open %s yourself\n", err, url)
						}
					}
				},
			})
		}),
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7466", "a loopback HOST:PORT (port 0 picks a free one)")
	f.BoolVar(&open, "open", false, "open the dashboard in the default browser")
	f.BoolVar(&requireToken, "require-token", false, "require a token on every page and request (without it, whatever is served without a token is read-only)")
	f.StringArrayVar(&allowedHosts, "allowed-host", nil, "a further Host the dashboard answers to: NAME (any port) or NAME:PORT; repeatable")
	return c
}

// openBrowser asks the desktop to open url, without waiting for it.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url) // #nosec G204 -- url is the loopback address we listen on
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url) // #nosec G204 -- as above
	default:
		cmd = exec.Command("xdg-open", url) // #nosec G204 -- url is the loopback address we listen on
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
