package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Processes: Config.Processes child processes each run W1 at c=1 through
// one server, as that many agents on one host would, each its own program
// with its own connection. Their writes meet in the server's store, which
// puts concurrent ones into one commit. The baseline is W1 at the same
// total concurrency in this process on the same store.

// w1Round is what the parent sends a "w1" child for each round: measure
// for this long.
type w1Round struct {
	ForNs int64 `json:"for_ns"`
}

// w1Result is a "w1" child's answer to a round (or its ready line, or
// its error).
type w1Result struct {
	Ready     bool    `json:"ready,omitempty"`
	Ops       int     `json:"ops,omitempty"`
	ElapsedNs int64   `json:"elapsed_ns,omitempty"`
	LatNs     []int64 `json:"lat_ns,omitempty"`
	Err       string  `json:"err,omitempty"`
}

// childW1 opens req.DSN, creates its artifact under req.Name, says it is
// ready, then measures W1 at c=1 for each round the parent sends, until
// stdin ends.
func childW1(ctx context.Context, req childRequest, in *bufio.Reader, enc *json.Encoder) error {
	ws, err := workspace.Open(ctx, req.DSN)
	if err != nil {
		return enc.Encode(w1Result{Err: err.Error()})
	}
	defer ws.Close()
	e := &env{dsn: req.DSN, prefix: req.Name, handles: []workspace.Workspace{ws}, updates: new(atomic.Int64), content: make([]byte, 1024)}
	_, _ = rand.Read(e.content)
	o, err := w1(ctx, e, "w1", 1)
	if err != nil {
		return enc.Encode(w1Result{Err: err.Error()})
	}
	if err := enc.Encode(w1Result{Ready: true}); err != nil {
		return err
	}
	for {
		line, err := in.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var r w1Round
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("bench child: round: %w", err)
		}
		res, err := measure(ctx, 1, time.Duration(r.ForNs), 0, o)
		ans := w1Result{Ops: res.ops, ElapsedNs: res.elapsed.Nanoseconds()}
		if err != nil {
			ans.Err = err.Error()
		}
		for _, l := range res.lat {
			ans.LatNs = append(ans.LatNs, l.Nanoseconds())
		}
		if err := enc.Encode(ans); err != nil {
			return err
		}
	}
}

// readW1 reads a "w1" child's next answer.
func (c *child) readW1() (w1Result, error) {
	if !c.out.Scan() {
		return w1Result{}, fmt.Errorf("child process ended (%v)", c.out.Err())
	}
	var r w1Result
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("child process: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("child process: %s", r.Err)
	}
	return r, nil
}

// runProcesses measures W1 run by cfg.Processes children through e's
// server, against W1 at that concurrency on base, alternating.
func runProcesses(ctx context.Context, e, base *env, cfg Config, progress func(string)) (Row, error) {
	n := cfg.Processes
	if cfg.Child == nil {
		return Row{}, errNoChild
	}
	label := fmt.Sprintf("W1 via %s, %d processes", e.via, n)
	progress(label + ": starting them")
	var kids []*child
	defer func() {
		for _, c := range kids {
			go func() {
				for c.out.Scan() {
				}
				close(c.read)
			}()
		}
		for _, c := range kids {
			c.stop()
		}
	}()
	for i := range n {
		c, err := startChild(ctx, cfg.Child, childRequest{Op: "w1", DSN: e.dsn, Name: fmt.Sprintf("%s/p%d", e.prefix, i)})
		if err != nil {
			return Row{}, err
		}
		kids = append(kids, c)
	}
	for _, c := range kids {
		if _, err := c.readW1(); err != nil {
			return Row{}, err
		}
	}
	stop, err := drain(ctx, base.handles[0])
	if err != nil {
		return Row{}, err
	}
	defer stop()
	inproc, err := w1(ctx, base, "w1p", n)
	if err != nil {
		return Row{}, err
	}
	slice := cfg.Duration / (2 * rounds)
	round, _ := json.Marshal(w1Round{ForNs: slice.Nanoseconds()})
	round = append(round, '\n')
	var (
		ours, raw result
		commits   int64
	)
	for i := range rounds {
		progress(fmt.Sprintf("%s: in process (round %d/%d)", label, i+1, rounds))
		res, err := measure(ctx, n, slice, 0, inproc)
		if err != nil {
			return Row{}, fmt.Errorf("in process: %w", err)
		}
		raw.add(res)
		progress(fmt.Sprintf("%s: processes (round %d/%d)", label, i+1, rounds))
		before := e.updates.Load()
		for _, c := range kids {
			if _, err := c.stdin.Write(round); err != nil {
				return Row{}, fmt.Errorf("child process: %w", err)
			}
		}
		var longest time.Duration
		for _, c := range kids {
			r, err := c.readW1()
			if err != nil {
				return Row{}, err
			}
			ours.ops += r.Ops
			longest = max(longest, time.Duration(r.ElapsedNs))
			for _, l := range r.LatNs {
				ours.lat = append(ours.lat, time.Duration(l))
			}
		}
		ours.elapsed += longest
		commits += e.updates.Load() - before
	}
	row := Row{
		Workload: "W1", Variant: fmt.Sprintf("via %s, %d processes", e.via, n), Backend: e.backend, Concurrency: n,
		OpsPerSec: ours.rate(), P50us: ours.percentile(0.50), P99us: ours.percentile(0.99),
		RawOpsPerSec: raw.rate(), RawP50us: raw.percentile(0.50), RawP99us: raw.percentile(0.99),
		Note: fmt.Sprintf("%d child processes at c=1, each its own client of the server; baseline (raw columns): c=%d in process on the same store", n, n),
	}
	if row.RawOpsPerSec > 0 {
		row.Ratio = row.OpsPerSec / row.RawOpsPerSec
	}
	if ours.ops > 0 {
		row.CommitsPerOp = float64(commits) / float64(ours.ops)
	}
	return row, nil
}
