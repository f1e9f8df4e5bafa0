package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace/touch"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

func (a *app) mcpCmd() *cobra.Command {
	var (
		repo       string
		touchEvery time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the workspace to a coding agent over MCP (stdio)",
		Long: `mcp serves the workspace as a Model Context Protocol server on stdin and
stdout, for a coding agent that starts it (see 'wsctl setup'). Its tools
act as --as (or AGENTSPACE_ACTOR); without one, reads work and writes are
refused with a tool error saying how to set it.

'wsctl serve' serves the same tools over HTTP at /mcp, acting as the
caller's token.

Run in a git repository (or with --repo), task_claim can also make the
claimed task's worktree (worktree: true), as 'wsctl task claim --worktree'.

With --touch-every D (default 10s; 0: off), each tool call is a heartbeat:
it renews the claims and leases the actor holds, at most once per D and
never by more than each last granted. An agent that stops calling loses
its claims when their leases lapse. See docs/agents.md.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, _ := a.actor()
			return a.with(ctx, func(ws *workspace.Workspace) error {
				dsn := a.dsn
				logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				opts := mcp.Options{Actor: actor, Version: readBuildInfo().Version, Logger: logger,
					Redact: func(err error) error { return driver.RedactError(err, dsn) }}
				if touchEvery > 0 {
					opts.Touch = touch.New(ws, touch.Options{Every: touchEvery})
				}
				// Worktrees only where there is a repository with the
				// integration branch; elsewhere such a claim is refused.
				if cfg, err := a.gitworkConfig(repo); err == nil {
					if m, err := gitwork.New(ctx, ws, cfg); err == nil {
						opts.Worktrees = m
					}
				}
				s := mcp.NewServer(ws, opts)
				defer s.Close()
				t := newDrainingStdio(a.stdin, a.stdout)
				err := s.Run(ctx, t)
				if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
					return nil
				}
				return err
			})
		}),
	}
	cmd.Flags().DurationVar(&touchEvery, "touch-every", touch.DefaultEvery, "renew the actor's claims and leases on tool calls, at most this often (0: off)")
	cmd.Flags().StringVar(&repo, "repo", ".", "the git repository task_claim's worktrees are made in (or any worktree of it)")
	return cmd
}

// drainingStdio is the stdio transport with one difference: at the end of
// stdin it waits until every request read has been answered before the
// SDK sees EOF, which otherwise drops the answers still being worked on
// (a client that writes its requests and closes its end gets them all).
// It counts requests as it passes the frames on and answers as they are
// written; the wait ends when the counts meet or the server stops.
type drainingStdio struct {
	in  io.Reader
	out io.Writer

	mu       sync.Mutex
	requests int
	answered int
	changed  chan struct{} // closed and replaced whenever answered grows
	stopped  chan struct{}
	stopOnce sync.Once
}

func newDrainingStdio(in io.Reader, out io.Writer) *drainingStdio {
	return &drainingStdio{in: in, out: out, changed: make(chan struct{}), stopped: make(chan struct{})}
}

// Connect implements sdk.Transport.
func (d *drainingStdio) Connect(ctx context.Context) (sdk.Connection, error) {
	pr, pw := io.Pipe()
	go d.pump(pw)
	return (&sdk.IOTransport{Reader: &stopReader{pr, d}, Writer: &countingWriter{d}}).Connect(ctx)
}

// pump copies stdin's frames to the SDK, counting requests, and closes
// the pipe once stdin ended and every request has its answer.
func (d *drainingStdio) pump(pw *io.PipeWriter) {
	dec := json.NewDecoder(d.in)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if !errors.Is(err, io.EOF) {
				// Let the SDK see (and report) what it cannot parse.
				rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), d.in))
				_, _ = pw.Write(rest)
			}
			break
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Method != "" && len(m.ID) > 0 {
			d.mu.Lock()
			d.requests++
			d.mu.Unlock()
		}
		if _, err := pw.Write(append(raw, '\n')); err != nil {
			return
		}
	}
	for {
		d.mu.Lock()
		done, changed := d.answered >= d.requests, d.changed
		d.mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
		case <-d.stopped:
			_ = pw.Close()
			return
		}
	}
	_ = pw.Close()
}

type stopReader struct {
	*io.PipeReader
	d *drainingStdio
}

// Close ends the pump's wait when the SDK closes the connection.
func (r *stopReader) Close() error {
	r.d.stopOnce.Do(func() { close(r.d.stopped) })
	return r.PipeReader.Close()
}

type countingWriter struct{ d *drainingStdio }

// Write passes one frame to stdout and counts it if it answers a request.
func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.d.out.Write(p)
	answers := 0
	var one struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var many []json.RawMessage
	if trimmed := bytes.TrimSpace(p); len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &many)
	} else {
		many = []json.RawMessage{trimmed}
	}
	for _, f := range many {
		one.ID, one.Method = nil, ""
		if json.Unmarshal(f, &one) == nil && one.Method == "" && len(one.ID) > 0 {
			answers++
		}
	}
	if answers > 0 {
		w.d.mu.Lock()
		w.d.answered += answers
		close(w.d.changed)
		w.d.changed = make(chan struct{})
		w.d.mu.Unlock()
	}
	return n, err
}

// Close leaves stdout open: the process owns it.
func (w *countingWriter) Close() error { return nil }
