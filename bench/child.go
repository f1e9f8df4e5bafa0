package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// A child is another process the suite runs part of a measurement in: W6's
// "other process" subscriber and MEM's probe, which wants a fresh process so
// that its RSS grows only with what it measures. Config.Child starts the
// process; whatever program it runs calls ServeChild on its stdin and
// stdout. The parent writes one JSON request line and keeps stdin open;
// the child answers with JSON lines and stops when stdin closes.

// childRequest is what the parent asks of a child.
type childRequest struct {
	// Op is "follow" (subscribe after After and report each event's seq
	// and arrival time), "mem" (run the memory probe and report), "w1"
	// (W1 at c=1 on the artifact Name, for as long as each later line
	// says: see childW1), "echo" (the same with W1's request to the bare
	// server at DSN: see echoServer) or "serve" (serve DSN's store on a
	// unix socket and report memory readings on request: see childServe).
	Op     string `json:"op"`
	DSN    string `json:"dsn"`
	After  int64  `json:"after,omitempty"`
	Subs   []int  `json:"subs,omitempty"`
	Events int    `json:"events,omitempty"`
	Name   string `json:"name,omitempty"`
	// CPUProfile, for "w1" and "echo", is where the child writes a CPU
	// profile of its run.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// childReceipt is one event a following child received, at its wall clock
// in Unix nanoseconds: parent and child share the machine's clock.
type childReceipt struct {
	Seq  int64 `json:"seq"`
	AtNs int64 `json:"at_ns"`
}

// childMem is a memory child's answer.
type childMem struct {
	Readings []memReading `json:"readings,omitempty"`
	Err      string       `json:"err,omitempty"`
}

// ServeChild is the child side of the suite's child processes: it reads one
// request from in, answers on out, and returns when the work is done or in
// reaches its end (the parent closed it or exited). Programs that set
// Config.Child run it when started that way (wsctl: `bench --serve-child`).
func ServeChild(ctx context.Context, in io.Reader, out io.Writer) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("bench child: read request: %w", err)
	}
	var req childRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return fmt.Errorf("bench child: request: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enc := json.NewEncoder(out)
	// These ops take more lines from the parent, and end at stdin's end.
	switch req.Op {
	case "w1", "echo":
		return childW1(ctx, req, br, enc)
	case "serve":
		return childServe(ctx, req, br, enc)
	}
	go func() {
		// The parent closing stdin (or dying) ends the child.
		_, _ = io.Copy(io.Discard, br)
		cancel()
	}()
	switch req.Op {
	case "follow":
		return childFollow(ctx, req, enc)
	case "mem":
		rs, err := memProbe(ctx, req.DSN, req.Subs, req.Events)
		ans := childMem{Readings: rs}
		if err != nil {
			ans.Err = err.Error()
		}
		return enc.Encode(ans)
	}
	return fmt.Errorf("bench child: unknown op %q", req.Op)
}

// childFollow subscribes from req.After and prints a childReceipt per event.
func childFollow(ctx context.Context, req childRequest, enc *json.Encoder) error {
	ws, err := workspace.Open(ctx, req.DSN)
	if err != nil {
		return err
	}
	defer ws.Close()
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: req.After}})
	if err != nil {
		return err
	}
	defer sub.Close()
	for m := range sub.C() {
		at := time.Now().UnixNano()
		if m.Progress {
			continue
		}
		if err := enc.Encode(childReceipt{Seq: m.Event.Seq, AtNs: at}); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sub.Err()
}

// errNoChild is returned when a measurement needs Config.Child and has none.
var errNoChild = errors.New("bench: no child process configured")

// child is a started child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	cancel context.CancelFunc
	once   sync.Once
	// read is closed by whoever reads out once it has reached the end;
	// stop waits for it before reaping the process.
	read chan struct{}
}

// startChild starts cfg's child and sends it req.
func startChild(ctx context.Context, start func(context.Context) *exec.Cmd, req childRequest) (*child, error) {
	if start == nil {
		return nil, errNoChild
	}
	cctx, cancel := context.WithCancel(ctx)
	cmd := start(cctx)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start child process: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), cancel: cancel, read: make(chan struct{})}
	c.out.Buffer(make([]byte, 64<<10), 4<<20)
	line, _ := json.Marshal(req)
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		c.stop()
		return nil, fmt.Errorf("child process: send request: %w", err)
	}
	return c, nil
}

// stop closes the child's stdin, which ends it, and waits for it (and for
// the reader of its output); the child is killed if it does not end
// within 10s.
func (c *child) stop() {
	c.once.Do(func() {
		_ = c.stdin.Close()
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				c.cancel()
			}
		}()
		<-c.read
		_ = c.cmd.Wait()
		close(done)
		c.cancel()
	})
}
