package team

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Recheck checks a finished run's invariants again from what it left in
// dir (run.json, agents/*.jsonl, report.json) against dsn's workspace as it
// is now, following the run's stretch of the log afresh, and rewrites
// report.json and report.md with the result. Its error wraps ErrInvariant
// when one fails: a record edited to claim a write the store never made,
// or a write removed since, shows here.
func Recheck(ctx context.Context, dsn, dir string) (*Report, error) {
	var m meta
	if err := readJSON(filepath.Join(dir, "run.json"), &m); err != nil {
		return nil, err
	}
	var rep Report
	if err := readJSON(filepath.Join(dir, "report.json"), &rep); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "agents", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, name := range files {
		f, err := os.Open(name) // #nosec G304 -- the run's own record files
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("team: %s: %w", name, err)
			}
			if r.Op != opReady {
				recs = append(recs, r)
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Logger: slog.New(slog.DiscardHandler), MustExist: true})
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	fol := newFollower(ws, m.Head0)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); fol.run(fctx) }()
	fol.waitFor(ctx, m.Head, 2*time.Minute)
	cancel()
	<-done
	// What only the run could see (its agents' exits) stays as it found it.
	var kept []Invariant
	for _, inv := range rep.Invariants {
		if inv.Name == agentsExited {
			kept = append(kept, inv)
		}
	}
	invs := append(kept, checkAll(ctx, ws, m, recs, fol, nil)...)
	// The figures and charts again, from the records, as the run drew them.
	cpu := m.CPU
	if len(cpu) == 0 {
		cpu = samplesOf(&rep)
	}
	r := &run{name: m.Run, start: rep.Start, recs: recs, marks: rep.Marks, cpu: cpu, fol: fol}
	r.cfg = Config{DSN: dsn, Agents: rep.Agents, Servers: rep.Servers, Hot: m.Hot, Locks: m.Locks}
	r.cfg.Mix, _ = ParseMix(rep.Mix)
	r.cfg.Think, _ = time.ParseDuration(rep.Think)
	stop := rep.Start.Add(time.Duration(rep.WallSeconds * float64(time.Second)))
	again := r.report(stop, m.Head0, m.Head)
	again.Store, again.DrainSeconds = rep.Store, rep.DrainSeconds
	again.CPUusPerOp, again.CPUusPerEvent, again.MachineBusyPct, again.CPUs = rep.CPUusPerOp, rep.CPUusPerEvent, rep.MachineBusyPct, rep.CPUs
	rep = *again
	rep.Invariants = invs
	rep.OK = true
	for _, inv := range rep.Invariants {
		rep.OK = rep.OK && inv.OK
	}
	if err := rep.write(dir, r); err != nil {
		return &rep, err
	}
	if !rep.OK {
		return &rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.failed(), "; "))
	}
	return &rep, nil
}

func readJSON(name string, v any) error {
	b, err := os.ReadFile(name) // #nosec G304 -- the run's own files
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// samplesOf makes CPU samples from a report's buckets, for a run whose
// run.json kept none (written before it did): cumulative readings at the
// buckets' edges that give each bucket the busy share it reported.
func samplesOf(rep *Report) []cpuSample {
	cpus := rep.CPUs
	if cpus <= 0 || len(rep.Buckets) == 0 {
		return nil
	}
	var out []cpuSample
	var busy, total time.Duration
	out = append(out, cpuSample{At: rep.Start})
	for i, b := range rep.Buckets {
		end := rep.WallSeconds
		if i+1 < len(rep.Buckets) {
			end = rep.Buckets[i+1].T
		}
		w := time.Duration((end - b.T) * cpus * float64(time.Second))
		if w <= 0 {
			continue
		}
		total += w
		busy += time.Duration(float64(w) * b.BusyPct / 100)
		out = append(out, cpuSample{At: rep.Start.Add(time.Duration(end * float64(time.Second))), Busy: busy, Tick: total})
	}
	return out
}
