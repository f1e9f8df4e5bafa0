package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

const actor = "bench"

// spec names one measurement: what the raw baseline must do.
type spec struct {
	workload string
	variant  string
	c        int
	n        int // W3: artifacts; W5: tasks
}

// bcase is one row to measure. setup prepares the store for it and
// returns our op, and the raw baseline's (nil if there is none).
type bcase struct {
	spec
	// latency: the row is about the latency an op reports (W6, hand-over),
	// so the ratio compares p99s.
	latency bool
	note    string
	setup   func(ctx context.Context) (ours, raw op, cleanup func(), err error)
}

// cases returns the rows of workload name and a cleanup for what they share.
func cases(ctx context.Context, e *env, r rawStore, cfg Config, name string) ([]bcase, func(), error) {
	var out []bcase
	each := func(variant string, n int, note string, f func(ctx context.Context, c int) (op, error)) {
		for _, c := range cfg.Concurrency {
			s := spec{workload: name, variant: variant, c: c, n: n}
			out = append(out, bcase{spec: s, note: note, setup: func(ctx context.Context) (op, op, func(), error) {
				ours, err := f(ctx, c)
				if err != nil {
					return nil, nil, nil, err
				}
				raw, cleanup, err := r.op(ctx, s)
				return ours, raw, cleanup, err
			}})
		}
	}
	nothing := func() {}
	switch name {
	case "W1":
		sub, err := drain(ctx, e.handles[0])
		if err != nil {
			return nil, nil, err
		}
		each("", 0, "", func(ctx context.Context, c int) (op, error) { return w1(ctx, e, "w1", c) })
		if e.backend == "postgres" && e.via == "" {
			each("vs raw+notify", 0, "", func(ctx context.Context, c int) (op, error) { return w1(ctx, e, "w1n", c) })
		}
		return out, sub, nil
	case "W2":
		each("", 0, "", func(ctx context.Context, c int) (op, error) { return w2(ctx, e, c) })
	case "W3":
		if err := loadArtifacts(ctx, e, cfg.Artifacts, progressFunc(cfg.Progress)); err != nil {
			return nil, nil, err
		}
		if err := settle(ctx, e, cfg); err != nil {
			return nil, nil, err
		}
		each("", cfg.Artifacts, fmt.Sprintf("N=%d", cfg.Artifacts)+analyzed(e, cfg), func(ctx context.Context, c int) (op, error) {
			return w3(e, cfg.Artifacts), nil
		})
	case "W4":
		each("", 0, "", func(ctx context.Context, c int) (op, error) { return w4(e, c), nil })
		for _, v := range []string{"handover same handle", "handover other handle"} {
			s := spec{workload: name, variant: v, c: 1}
			other := v == "handover other handle"
			out = append(out, bcase{spec: s, latency: true, note: "latency: release -> waiter acquired", setup: func(ctx context.Context) (op, op, func(), error) {
				raw, cleanup, err := r.op(ctx, s)
				return w4handover(e, other), raw, cleanup, err
			}})
		}
	case "W5":
		pool, err := w5(ctx, e, cfg.Tasks, progressFunc(cfg.Progress))
		if err != nil {
			return nil, nil, err
		}
		if err := settle(ctx, e, cfg); err != nil {
			return nil, nil, err
		}
		each("", cfg.Tasks, fmt.Sprintf("pool=%d", cfg.Tasks)+analyzed(e, cfg), func(ctx context.Context, c int) (op, error) {
			return pool, nil
		})
	case "W6":
		variants := []string{"same handle", "other handle"}
		if e.backend == "postgres" && e.via == "" {
			variants = append(variants, "other pool")
		}
		if cfg.Child != nil {
			variants = append(variants, "other process")
		}
		variants = append(variants, "resume")
		for _, v := range variants {
			s := spec{workload: name, variant: v, c: 1}
			note := "latency: commit -> subscriber receipt"
			switch v {
			case "resume":
				note = "latency: Subscribe from an old seq -> first event"
			case "other pool":
				note += " (a handle with its own pgxpool, woken by LISTEN/NOTIFY)"
			case "other process":
				note += " (a child process; both timestamps on this machine's clock)"
			}
			out = append(out, bcase{spec: s, latency: true, note: note, setup: func(ctx context.Context) (op, op, func(), error) {
				ours, stop, err := w6(ctx, e, v, cfg.Child)
				if err != nil {
					return nil, nil, nil, err
				}
				raw, rawStop, err := r.op(ctx, s)
				if err != nil {
					stop()
					return nil, nil, nil, err
				}
				return ours, raw, func() { stop(); rawStop() }, nil
			}})
		}
	case "W7":
		each("", 0, "", func(ctx context.Context, c int) (op, error) { return w7(ctx, e, c) })
	case "W8":
		for _, v := range []string{"same handle", "other handle"} {
			out = append(out, w8Case(e, v, cfg.PollEvery))
		}
	default:
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownWorkload, name)
	}
	return out, nothing, nil
}

// settle runs ANALYZE if cfg.Analyze, then waits cfg.Settle after a load.
func settle(ctx context.Context, e *env, cfg Config) error {
	if cfg.Analyze {
		progressFunc(cfg.Progress)("analyzing after the load")
		if err := analyzePostgres(ctx, e); err != nil {
			return err
		}
	}
	if cfg.Settle <= 0 {
		return nil
	}
	progressFunc(cfg.Progress)(fmt.Sprintf("settling for %s after the load", cfg.Settle))
	select {
	case <-time.After(cfg.Settle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// analyzed is the note's mark of a load that settle analyzed.
func analyzed(e *env, cfg Config) string {
	if cfg.Analyze && e.backend == "postgres" {
		return ", analyzed"
	}
	return ""
}

// drain attaches a subscriber to ws that reads everything until cleanup.
func drain(ctx context.Context, ws *workspace.Workspace) (func(), error) {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range sub.C() {
		}
	}()
	return func() { _ = sub.Close(); <-done }, nil
}

// artifactsPerWorker creates one artifact per goroutine and returns their
// names and versions.
func artifactsPerWorker(ctx context.Context, e *env, tag string, c int) ([]string, []int64, error) {
	names := make([]string, c)
	versions := make([]int64, c)
	for w := range c {
		names[w] = fmt.Sprintf("%s/%s/c%d/%d", e.prefix, tag, c, w)
		a, err := e.ws(w).Artifacts().Create(ctx, workspace.Write{Actor: actor}, workspace.NewArtifact{Name: names[w], Kind: "output", Content: e.body(w, 0)})
		if err != nil {
			return nil, nil, err
		}
		versions[w] = a.Version
	}
	return names, versions, nil
}

// w1: a conditional update of a 1 KiB artifact, each goroutine its own.
func w1(ctx context.Context, e *env, tag string, c int) (op, error) {
	names, versions, err := artifactsPerWorker(ctx, e, tag, c)
	if err != nil {
		return nil, err
	}
	return plain(func(ctx context.Context, w int) error {
		a, err := e.ws(w).Artifacts().Update(ctx, workspace.Write{Actor: actor, IfVersion: versions[w]},
			workspace.ArtifactRef{Name: names[w]}, workspace.ArtifactChange{Content: e.body(w, int(versions[w]))})
		if err != nil {
			return err
		}
		versions[w] = a.Version
		return nil
	}), nil
}

// w2: get a 1 KiB artifact by name.
func w2(ctx context.Context, e *env, c int) (op, error) {
	names, _, err := artifactsPerWorker(ctx, e, "w2", c)
	if err != nil {
		return nil, err
	}
	return plain(func(ctx context.Context, w int) error {
		a, err := e.ws(w).Artifacts().Get(ctx, workspace.ArtifactRef{Name: names[w]})
		if err == nil && len(a.Content) != 1024 {
			err = fmt.Errorf("W2: got %d bytes, want 1024", len(a.Content))
		}
		return err
	}), nil
}

// w3Name is the i-th of W3's artifacts; names sort as numbers do.
func w3Name(prefix string, i int) string { return fmt.Sprintf("%s/w3/%07d", prefix, i) }

// loadArtifacts creates n small artifacts under the W3 prefix, 200 per batch.
func loadArtifacts(ctx context.Context, e *env, n int, progress func(string)) error {
	const per = 200
	for i := 0; i < n; i += per {
		b := workspace.Batch{Actor: actor}
		for k := i; k < min(n, i+per); k++ {
			b.Ops = append(b.Ops, workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: w3Name(e.prefix, k), Kind: "output", Content: []byte("x")}})
		}
		if _, err := e.ws(i/per).Commit(ctx, b); err != nil {
			return fmt.Errorf("W3: load: %w", err)
		}
		if progress != nil {
			progress(fmt.Sprintf("W3: loading artifacts %d/%d", i, n))
		}
	}
	return nil
}

// w3: one page of 100 by prefix, from a random place among n.
func w3(e *env, n int) op {
	prefix := e.prefix + "/w3/"
	return plain(func(ctx context.Context, w int) error {
		i := rand.IntN(max(1, n-100)) // #nosec G404 -- which record a benchmark reads needs no unpredictability
		p, err := e.ws(w).Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: prefix, After: w3Name(e.prefix, i), Limit: 100})
		if err == nil && len(p.Artifacts) != min(100, n-i-1) {
			err = fmt.Errorf("W3: listed %d, want 100", len(p.Artifacts))
		}
		return err
	})
}

// w4: acquire and release a lease, each goroutine its own resource.
func w4(e *env, c int) op {
	return plain(func(ctx context.Context, w int) error {
		res := fmt.Sprintf("%s/w4/c%d/%d", e.prefix, c, w)
		l, err := e.ws(w).Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: actor, TTL: time.Minute})
		if err != nil {
			return err
		}
		return e.ws(w).Locks().Release(ctx, l)
	})
}

// w4handover: the holder releases while a waiter blocks in Acquire; the
// latency is from the release's return to the waiter's acquire returning.
func w4handover(e *env, other bool) op {
	holder, waiter := e.handles[0], e.handles[0]
	if other {
		waiter = e.handles[1%len(e.handles)]
	}
	res := fmt.Sprintf("%s/w4h/%v", e.prefix, other)
	return func(ctx context.Context, _ int) (time.Duration, error) {
		l, err := holder.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: "holder", TTL: time.Minute})
		if err != nil {
			return 0, err
		}
		type got struct {
			l   workspace.Lease
			at  time.Time
			err error
		}
		ch := make(chan got, 1)
		go func() {
			l, err := waiter.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: "waiter", TTL: time.Minute, Wait: true})
			ch <- got{l, time.Now(), err}
		}()
		time.Sleep(2 * time.Millisecond) // let the waiter block
		if err := holder.Locks().Release(ctx, l); err != nil {
			return 0, err
		}
		released := time.Now()
		g := <-ch
		if g.err != nil {
			return 0, g.err
		}
		if err := waiter.Locks().Release(ctx, g.l); err != nil {
			return 0, err
		}
		return max(0, g.at.Sub(released)), nil
	}
}

// w5: claim the best ready task of a pool of n, and complete it. Every
// concurrency level draws from the same pool, so the store holds no other
// pending tasks. Task i >= 1000 depends on task i-1000: 1000 are ready at first.
func w5(ctx context.Context, e *env, n int, progress func(string)) (op, error) {
	label := map[string]string{"bench": e.prefix + "-w5"}
	ids := make([]string, 0, n)
	const per = 200
	for i := 0; i < n; i += per {
		b := workspace.Batch{Actor: actor}
		for k := i; k < min(n, i+per); k++ {
			t := workspace.NewTask{Title: fmt.Sprintf("task %d", k), Labels: label}
			if k >= 1000 {
				t.DependsOn = []string{ids[k-1000]}
			}
			b.Ops = append(b.Ops, workspace.CreateTaskOp{Task: t})
		}
		res, err := e.ws(0).Commit(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("W5: load: %w", err)
		}
		for _, r := range res.Results {
			ids = append(ids, r.Task.ID)
		}
		if progress != nil {
			progress(fmt.Sprintf("W5: loading tasks %d/%d", i, n))
		}
	}
	return claimDone(e, label), nil
}

// claimDone: claim the best ready task labelled label, and complete it;
// errStop when none is ready.
func claimDone(e *env, label map[string]string) op {
	return plain(func(ctx context.Context, w int) error {
		ws := e.ws(w)
		t, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Labels: label, Lease: time.Minute})
		if errors.Is(err, workspace.ErrNoTask) {
			return errStop
		}
		if err != nil {
			return err
		}
		_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: actor}, t.ID, workspace.TaskResult{Summary: "ok"})
		return err
	})
}

// receipts follows ws from its head and records when each seq arrived.
type receipts struct {
	mu   sync.Mutex
	seen map[int64]time.Time
	wake chan struct{}
	stop func()
}

func follow(ctx context.Context, ws *workspace.Workspace) (*receipts, error) {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
	if err != nil {
		return nil, err
	}
	r := &receipts{seen: map[int64]time.Time{}, wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range sub.C() {
			if m.Progress {
				continue
			}
			r.mu.Lock()
			r.seen[m.Event.Seq] = time.Now()
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}()
	r.stop = func() { _ = sub.Close(); <-done }
	return r, nil
}

// await returns when seq arrived.
func (r *receipts) await(ctx context.Context, seq int64) (time.Time, error) {
	for {
		r.mu.Lock()
		at, ok := r.seen[seq]
		delete(r.seen, seq)
		r.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(10 * time.Second):
			return time.Time{}, fmt.Errorf("W6: event %d not delivered within 10s", seq)
		}
	}
}

// followProcess starts a child process that subscribes after ws's head
// and reports when each event arrived there.
func followProcess(ctx context.Context, e *env, ws *workspace.Workspace, start func(context.Context) *exec.Cmd) (*receipts, error) {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	c, err := startChild(ctx, start, childRequest{Op: "follow", DSN: e.dsn, After: head})
	if err != nil {
		return nil, fmt.Errorf("W6: %w", err)
	}
	r := &receipts{seen: map[int64]time.Time{}, wake: make(chan struct{}, 1)}
	go func() {
		defer close(c.read)
		for c.out.Scan() {
			var rc childReceipt
			if json.Unmarshal(c.out.Bytes(), &rc) != nil || rc.Seq == 0 {
				continue
			}
			r.mu.Lock()
			r.seen[rc.Seq] = time.Unix(0, rc.AtNs)
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}()
	r.stop = c.stop
	// Wait until the child is live: its start-up is not the latency.
	res, err := ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: e.prefix + "-w6-warm-up", Body: "x"}}}})
	if err == nil {
		_, err = r.await(ctx, res.Events[0].Seq)
	}
	if err != nil {
		r.stop()
		return nil, fmt.Errorf("W6: child process: %w", err)
	}
	return r, nil
}

// w6: the latency from a commit's return to its event's receipt by a
// subscriber on the same handle, another handle, a handle opened for the
// row (Postgres: its own pool, so LISTEN/NOTIFY wakes it), or another
// process; or, for "resume", from Subscribe with an old seq to the first
// backlog event.
func w6(ctx context.Context, e *env, variant string, child func(context.Context) *exec.Cmd) (op, func(), error) {
	sub := e.handles[0]
	if variant == "resume" {
		return func(ctx context.Context, _ int) (time.Duration, error) {
			head, err := sub.Events().Head(ctx)
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			s, err := sub.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: max(0, head-1000)}})
			if err != nil {
				return 0, err
			}
			defer s.Close()
			for {
				m, err := s.Next(ctx)
				if err != nil {
					return 0, err
				}
				if !m.Progress {
					return time.Since(t0), nil
				}
			}
		}, func() {}, nil
	}
	writer := sub
	var (
		r   *receipts
		err error
	)
	switch variant {
	case "other handle":
		writer = e.handles[1%len(e.handles)]
		r, err = follow(ctx, sub)
	case "other pool":
		var own *workspace.Workspace
		if own, err = e.open(ctx); err != nil {
			return nil, nil, err
		}
		if r, err = follow(ctx, own); err != nil {
			_ = own.Close()
			return nil, nil, err
		}
		stop := r.stop
		r.stop = func() { stop(); _ = own.Close() }
	case "other process":
		r, err = followProcess(ctx, e, sub, child)
	default:
		r, err = follow(ctx, sub)
	}
	if err != nil {
		return nil, nil, err
	}
	n := 0
	return func(ctx context.Context, _ int) (time.Duration, error) {
		n++
		res, err := writer.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: e.prefix + "-w6", Body: fmt.Sprint(n)}}}})
		if err != nil {
			return 0, err
		}
		committed := time.Now()
		at, err := r.await(ctx, res.Events[0].Seq)
		if err != nil {
			return 0, err
		}
		return max(0, at.Sub(committed)), nil
	}, r.stop, nil
}

// w7: a batch of three ops: a conditional 1 KiB artifact update and two note puts.
func w7(ctx context.Context, e *env, c int) (op, error) {
	names, versions, err := artifactsPerWorker(ctx, e, "w7", c)
	if err != nil {
		return nil, err
	}
	return plain(func(ctx context.Context, w int) error {
		key := fmt.Sprintf("%s-w7-c%d-%d", e.prefix, c, w)
		res, err := e.ws(w).Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
			workspace.UpdateArtifactOp{Ref: workspace.ArtifactRef{Name: names[w]}, Change: workspace.ArtifactChange{Content: e.body(w, int(versions[w]))}, Cond: workspace.Cond{IfVersion: versions[w]}},
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: key + "-a", Body: "a"}},
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: key + "-b", Body: "b"}},
		}})
		if err != nil {
			return err
		}
		versions[w] = res.Results[0].Artifact.Version
		return nil
	}), nil
}
