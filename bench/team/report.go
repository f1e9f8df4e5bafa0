package team

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Report is what a run measured and found; report.json holds it.
type Report struct {
	Run     string    `json:"run"`
	Store   string    `json:"store"` // the DSN, redacted
	Agents  int       `json:"agents"`
	Servers int       `json:"servers,omitempty"`
	Mix     string    `json:"mix"`
	Think   string    `json:"think"`
	Start   time.Time `json:"start"`
	// WallSeconds is the run until the agents were told to stop (rates
	// are per second of it); DrainSeconds how long they took to finish
	// the operations under way (a client's retries of a dead server).
	WallSeconds  float64 `json:"wall_seconds"`
	DrainSeconds float64 `json:"drain_seconds"`
	// Acked counts the operations acknowledged; Attempts every attempt,
	// retries and expected refusals (conflict, locked, notask) included.
	Acked    int64            `json:"acked"`
	Attempts int64            `json:"attempts"`
	Errors   map[string]int64 `json:"errors"` // attempts not acknowledged, by class
	// LogEvents is how much the log grew during the run.
	LogEvents    int64   `json:"log_events"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	EventsPerSec float64 `json:"events_per_sec"`
	// The whole machine's CPU (every process: agents, servers, database)
	// per acknowledged op and per event, and how busy it was.
	CPUusPerOp     float64  `json:"cpu_us_per_op,omitempty"`
	CPUusPerEvent  float64  `json:"cpu_us_per_event,omitempty"`
	MachineBusyPct float64  `json:"machine_busy_pct,omitempty"`
	CPUs           float64  `json:"cpus,omitempty"`
	Ops            []OpStat `json:"ops"`
	// Buckets are the run cut into BucketSeconds-long stretches.
	BucketSeconds float64     `json:"bucket_seconds"`
	Buckets       []Bucket    `json:"buckets"`
	Marks         []Mark      `json:"marks,omitempty"`
	Invariants    []Invariant `json:"invariants"`
	OK            bool        `json:"ok"`
}

// OpStat is one operation's figures over the run (acknowledged attempts'
// latencies).
type OpStat struct {
	Op     string           `json:"op"`
	OK     int64            `json:"ok"`
	Errors map[string]int64 `json:"errors,omitempty"`
	PerSec float64          `json:"per_sec"`
	P50us  float64          `json:"p50_us"`
	P99us  float64          `json:"p99_us"`
}

// Bucket is one stretch of the run.
type Bucket struct {
	T       float64             `json:"t"` // seconds from the start to the stretch's start
	Ops     map[string]BucketOp `json:"ops"`
	Errors  int64               `json:"errors,omitempty"` // unavailable, retried, unknown and failed attempts
	BusyPct float64             `json:"busy_pct,omitempty"`
}

// BucketOp is one operation's figures in a bucket.
type BucketOp struct {
	N     int64   `json:"n"`
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
}

// opOrder lists the record ops in the order reports show them.
var opOrder = []string{OpClaim, "done", "add", OpPut, OpHot, OpLock, "fenced", "unlock", "inbox", "ack", OpMsg, OpNote}

// expected reports whether class is a refusal the mix expects under
// contention (not an error of the store).
func expected(class string) bool {
	return class == ErrClassConflict || class == ErrClassLocked || class == ErrClassNoTask
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func (r *run) report(end time.Time, head0, head int64) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	wall := end.Sub(r.start).Seconds()
	rep := &Report{
		Run: r.name, Store: workspace.RedactDSN(r.cfg.DSN), Agents: r.cfg.Agents, Servers: r.cfg.Servers,
		Mix: r.cfg.Mix.String(), Think: r.cfg.Think.String(), Start: r.start, WallSeconds: wall,
		Errors: map[string]int64{}, LogEvents: head - head0, Marks: r.marks,
	}
	// Up to 40 buckets of equal width, at least a second each; an attempt
	// begun after the stop (the drain) is in the figures, not the buckets.
	nb := min(40, max(1, int(wall)))
	width := max(wall, 1e-3) / float64(nb)
	rep.BucketSeconds = width
	type acc struct{ lat map[string][]float64 }
	buckets := make([]acc, nb)
	for i := range buckets {
		buckets[i].lat = map[string][]float64{}
	}
	errsPerBucket := make([]int64, nb)
	lat := map[string][]float64{}
	errs := map[string]map[string]int64{}
	for _, rec := range r.recs {
		rep.Attempts++
		b := int(float64(rec.Start-r.start.UnixNano()) / 1e9 / width)
		inRun := b >= 0 && b < nb
		b = min(nb-1, max(0, b))
		if rec.Err != "" {
			rep.Errors[rec.Err]++
			if errs[rec.Op] == nil {
				errs[rec.Op] = map[string]int64{}
			}
			errs[rec.Op][rec.Err]++
			if !expected(rec.Err) && inRun {
				errsPerBucket[b]++
			}
			continue
		}
		rep.Acked++
		us := float64(rec.End-rec.Start) / 1e3
		lat[rec.Op] = append(lat[rec.Op], us)
		if inRun {
			buckets[b].lat[rec.Op] = append(buckets[b].lat[rec.Op], us)
		}
	}
	if wall > 0 {
		rep.OpsPerSec = float64(rep.Acked) / wall
		rep.EventsPerSec = float64(rep.LogEvents) / wall
	}
	ops := slices.Collect(maps.Keys(lat))
	for op := range errs {
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return slices.Index(opOrder, ops[i]) < slices.Index(opOrder, ops[j]) })
	for _, op := range ops {
		l := lat[op]
		slices.Sort(l)
		rep.Ops = append(rep.Ops, OpStat{Op: op, OK: int64(len(l)), Errors: errs[op], PerSec: float64(len(l)) / max(wall, 1e-9), P50us: pct(l, 0.5), P99us: pct(l, 0.99)})
	}
	for i, b := range buckets {
		out := Bucket{T: float64(i) * width, Ops: map[string]BucketOp{}, Errors: errsPerBucket[i]}
		for op, l := range b.lat {
			slices.Sort(l)
			out.Ops[op] = BucketOp{N: int64(len(l)), P50us: pct(l, 0.5), P99us: pct(l, 0.99)}
		}
		out.BusyPct = r.busyBetween(r.start.Add(time.Duration(float64(i)*width*1e9)), r.start.Add(time.Duration(float64(i+1)*width*1e9)))
		rep.Buckets = append(rep.Buckets, out)
	}
	return rep
}

// busyBetween is how busy the machine was between from and to (percent of
// all its CPUs), from the samples drive took.
func (r *run) busyBetween(from, to time.Time) float64 {
	// The last sample at or before from, the first at or after to (the
	// nearest ones inside where the run has none outside).
	var a, b *cpuSample
	for i := range r.cpu {
		s := &r.cpu[i]
		if a == nil || !s.At.After(from) {
			a = s
		}
		if b == nil && !s.At.Before(to) {
			b = s
		}
	}
	if b == nil && len(r.cpu) > 0 {
		b = &r.cpu[len(r.cpu)-1]
	}
	if a == nil || b == nil || b.Tick <= a.Tick {
		return 0
	}
	return 100 * float64(b.Busy-a.Busy) / float64(b.Tick-a.Tick)
}

func (rep *Report) setCPU(busy, total time.Duration) {
	if total <= 0 || rep.WallSeconds <= 0 {
		return
	}
	rep.MachineBusyPct = 100 * float64(busy) / float64(total)
	rep.CPUs = total.Seconds() / rep.WallSeconds
	if rep.Acked > 0 {
		rep.CPUusPerOp = float64(busy.Microseconds()) / float64(rep.Acked)
	}
	if rep.LogEvents > 0 {
		rep.CPUusPerEvent = float64(busy.Microseconds()) / float64(rep.LogEvents)
	}
}

func (rep *Report) failed() []string {
	var out []string
	for _, inv := range rep.Invariants {
		if !inv.OK {
			out = append(out, inv.Name+": "+inv.Detail)
		}
	}
	return out
}

// write writes report.json, report.md, run.json and the charts to dir.
func (rep *Report) write(dir string, r *run) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o600); err != nil {
		return err
	}
	if r != nil {
		r.mu.Lock()
		cpu := slices.Clone(r.cpu)
		r.mu.Unlock()
		mb, _ := json.MarshalIndent(meta{Run: r.name, Agents: r.cfg.Agents, Hot: r.cfg.Hot, Locks: r.cfg.Locks, Head0: r.fol.from, Head: rep.LogEvents + r.fol.from, CPU: cpu}, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "run.json"), append(mb, '\n'), 0o600); err != nil {
			return err
		}
		for name, svg := range map[string]string{
			"timeline.svg": timelineSVG(rep, r),
			"latency.svg":  latencySVG(rep),
			"rate.svg":     rateSVG(rep),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o600); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(rep.Markdown()), 0o600)
}

// Markdown is the report for people.
func (rep *Report) Markdown() string {
	var s strings.Builder
	verdict := "every invariant held"
	if !rep.OK {
		verdict = "INVARIANTS FAILED: " + strings.Join(rep.failed(), "; ")
	}
	fmt.Fprintf(&s, "# Team run %s: %s\n\n", rep.Run, verdict)
	fmt.Fprintf(&s, "%d agent processes on `%s`", rep.Agents, rep.Store)
	if rep.Servers > 0 {
		fmt.Fprintf(&s, " through %d servers", rep.Servers)
	}
	fmt.Fprintf(&s, ", mix %s, think %s, %.0f s (and %.1f s for the agents to finish what was under way).\n\n", rep.Mix, rep.Think, rep.WallSeconds, rep.DrainSeconds)
	fmt.Fprintf(&s, "| acknowledged ops | ops/s | log events | events/s | attempts | machine CPU per op | per event | machine busy |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&s, "| %d | %.0f | %d | %.0f | %d | %.0f µs | %.0f µs | %.0f%% of %.0f CPUs |\n\n",
		rep.Acked, rep.OpsPerSec, rep.LogEvents, rep.EventsPerSec, rep.Attempts, rep.CPUusPerOp, rep.CPUusPerEvent, rep.MachineBusyPct, rep.CPUs)
	fmt.Fprintf(&s, "| op | ok | ok/s | p50 | p99 | not acknowledged |\n|---|---|---|---|---|---|\n")
	for _, o := range rep.Ops {
		var e []string
		for _, k := range slices.Sorted(maps.Keys(o.Errors)) {
			e = append(e, fmt.Sprintf("%s %d", k, o.Errors[k]))
		}
		fmt.Fprintf(&s, "| %s | %d | %.1f | %s | %s | %s |\n", o.Op, o.OK, o.PerSec, dur(o.P50us), dur(o.P99us), strings.Join(e, ", "))
	}
	if len(rep.Marks) > 0 {
		s.WriteString("\nMarks:\n\n")
		for _, m := range rep.Marks {
			fmt.Fprintf(&s, "- %.1f s: %s\n", m.At.Sub(rep.Start).Seconds(), m.What)
		}
	}
	s.WriteString("\n| invariant | held | checked | detail |\n|---|---|---|---|\n")
	for _, inv := range rep.Invariants {
		ok := "yes"
		if !inv.OK {
			ok = "**NO**"
		}
		fmt.Fprintf(&s, "| %s | %s | %d | %s |\n", inv.Name, ok, inv.Checked, strings.ReplaceAll(inv.Detail, "|", "\\|"))
	}
	s.WriteString("\n![timeline](timeline.svg)\n\n![rate](rate.svg)\n\n![latency](latency.svg)\n")
	return s.String()
}

func dur(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.1fms", us/1e3)
	}
	return fmt.Sprintf("%.0fµs", us)
}
