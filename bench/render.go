package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// renderers are the regions a doc may hold: each writes its tables from a
// record, a missing row as "-".
var renderers = map[string]func(b *strings.Builder, rec *Record){
	"figures":       renderFigures,
	"messages":      renderMessages,
	"served":        renderServed,
	"targets":       renderTargets,
	"cli":           renderCLI,
	"growth":        renderGrowth,
	"tables":        func(b *strings.Builder, rec *Record) { renderFull(b, rec, false) },
	"served-tables": func(b *strings.Builder, rec *Record) { renderFull(b, rec, true) },
}

// docsBackends are the in-process tables' columns, and served the served
// tables'.
var (
	docsBackends   = []string{"sqlite", "postgres", "json"}
	servedBackends = []string{"sqlite", "postgres"}
)

// run is the record's run of that name, or nil.
func (rec *Record) run(name string) *RecordRun {
	for i := range rec.Runs {
		if rec.Runs[i].Name == name {
			return &rec.Runs[i]
		}
	}
	return nil
}

// row is run name's row of workload and variant at concurrency c (c 0:
// any), or nil.
func (rec *Record) row(name, workload, variant string, c int) *Row {
	r := rec.run(name)
	if r == nil {
		return nil
	}
	for i := range r.Rows {
		x := &r.Rows[i]
		if x.Workload == workload && x.Variant == variant && (c == 0 || x.Concurrency == c) {
			return x
		}
	}
	return nil
}

// Cell formatters: a missing row is "-", and so is a rate or ratio of 0
// (a row without a baseline). A latency of 0 is a figure: the event came
// before the commit's answer.

func fmtRatio(r *Row) string {
	if r == nil || r.Ratio <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r.Ratio)
}

func fmtOps(r *Row) string {
	if r == nil || r.OpsPerSec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/s", r.OpsPerSec)
}

func fmtP50(r *Row) string {
	if r == nil {
		return "-"
	}
	return FormatMicros(r.P50us)
}

func fmtP50P99(r *Row) string {
	if r == nil {
		return "-"
	}
	return FormatMicros(r.P50us) + " / " + FormatMicros(r.P99us)
}

func fmtCommits(r *Row) string {
	if r == nil || r.CommitsPerOp <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.CommitsPerOp)
}

func fmtMicros(v float64) string {
	if v <= 0 {
		return "-"
	}
	return FormatMicros(v)
}

func fmtKiB(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f KiB", v)
}

// thousands writes n as 10k or 100k when it is a round thousand.
func thousands(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// table writes a markdown table: the header's first cell, then a column per
// backend, then each line's label and cells.
type table struct {
	b    *strings.Builder
	cols []string
}

func newTable(b *strings.Builder, first string, cols ...string) table {
	fmt.Fprintf(b, "| %s | %s |\n|%s\n", first, strings.Join(cols, " | "), strings.Repeat(" --- |", len(cols)+1))
	return table{b: b, cols: cols}
}

// line writes a line whose cell for each column is cell(column).
func (t table) line(label string, cell func(col string) string) {
	cells := make([]string, len(t.cols))
	for i, c := range t.cols {
		cells[i] = cell(c)
	}
	fmt.Fprintf(t.b, "| %s | %s |\n", label, strings.Join(cells, " | "))
}

// renderFigures is docs/performance.md's summary: the workloads in process
// on each backend, ours against the raw baseline.
func renderFigures(b *strings.Builder, rec *Record) {
	tasks := 10000
	if r := rec.run("sqlite"); r != nil {
		tasks = r.Tasks
	}
	big := "100k"
	if r := rec.run("sqlite 100k"); r != nil {
		big = thousands(r.Artifacts)
	}
	small := "10k"
	if r := rec.run("sqlite"); r != nil {
		small = thousands(r.Artifacts)
	}
	t := newTable(b, "", docsBackends...)
	notify := func(be string, c int, shared bool, f func(*Row) string) string {
		if be != "postgres" {
			return ""
		}
		name := be
		if shared {
			name += " shared"
		}
		return f(rec.row(name, "W1", "vs raw+notify", c))
	}
	t.line("W1 conditional update, c=1: ratio to raw, private / shared", func(be string) string {
		s := fmtRatio(rec.row(be, "W1", "", 1)) + " / " + fmtRatio(rec.row(be+" shared", "W1", "", 1))
		if be == "postgres" {
			s += fmt.Sprintf(" (vs raw+notify %s / %s)", notify(be, 1, false, fmtRatio), notify(be, 1, true, fmtRatio))
		}
		return s
	})
	t.line("W1 c=16, shared: ops/s, ratio to raw, commits/op", func(be string) string {
		r := rec.row(be+" shared", "W1", "", 16)
		s := fmt.Sprintf("%s, %s, %s", fmtOps(r), fmtRatio(r), fmtCommits(r))
		if be == "postgres" {
			s += fmt.Sprintf(" (vs raw+notify %s)", notify(be, 16, true, fmtRatio))
		}
		return s
	})
	t.line("W1 c=16, private: ratio to raw", func(be string) string {
		s := fmtRatio(rec.row(be, "W1", "", 16))
		if be == "postgres" {
			s += fmt.Sprintf(" (vs raw+notify %s)", notify(be, 16, false, fmtRatio))
		}
		return s
	})
	t.line("W2 get by name, c=1: p50, ratio", func(be string) string {
		r := rec.row(be, "W2", "", 1)
		return fmtP50(r) + ", " + fmtRatio(r)
	})
	t.line(fmt.Sprintf("W3 page of 100 by prefix, c=1: p50 at %s / %s", small, big), func(be string) string {
		return fmtP50(rec.row(be, "W3", "", 1)) + " / " + fmtP50(rec.row(be+" 100k", "W3", "", 1))
	})
	t.line("W4 acquire + release, c=1: ratio; hand-over p50, same / other handle", func(be string) string {
		return fmt.Sprintf("%s; %s / %s", fmtRatio(rec.row(be, "W4", "", 1)),
			fmtP50(rec.row(be, "W4", "handover same handle", 1)), fmtP50(rec.row(be, "W4", "handover other handle", 1)))
	})
	t.line(fmt.Sprintf("W5 claim + done from %s tasks, c=1: ratio", thousands(tasks)), func(be string) string {
		return fmtRatio(rec.row(be, "W5", "", 1))
	})
	t.line("W6 commit → subscriber, p50 / p99: same handle; other handle; other process", func(be string) string {
		return fmt.Sprintf("%s; %s; %s", fmtP50P99(rec.row(be, "W6", "same handle", 1)),
			fmtP50P99(rec.row(be, "W6", "other handle", 1)), fmtP50P99(rec.row(be, "W6", "other process", 1)))
	})
	t.line("W6 resume from an old seq: first event p50", func(be string) string {
		return fmtP50(rec.row(be, "W6", "resume", 1))
	})
	t.line("W7 three-op batch: ratio to raw, c=1 / c=16", func(be string) string {
		return fmtRatio(rec.row(be, "W7", "", 1)) + " / " + fmtRatio(rec.row(be, "W7", "", 16))
	})
	t.line("MEM, Go heap + stacks: an idle handle, private / shared; per subscriber of 100, after 2000 events", func(be string) string {
		per := "-"
		if r := rec.row(be, "MEM", "subscribers after 2000 events", 100); r != nil {
			per = fmtKiB(r.HeapKiB / float64(r.Concurrency))
		}
		return fmt.Sprintf("%s / %s; %s", memHeap(rec.row(be, "MEM", "idle handle", 0)), memHeap(rec.row(be, "MEM", "idle shared handle", 0)), per)
	})
}

// memHeap is a MEM row's heap growth, signed.
func memHeap(r *Row) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%+.0f KiB", r.HeapKiB)
}

// renderMessages is W8's table: a message's hand-over to a waiting
// recipient, against the same recipient polling.
func renderMessages(b *strings.Builder, rec *Record) {
	fmt.Fprintf(b, "| W8, c=1 | same handle: p50 / p99 | other handle: p50 / p99 | polling instead, p50 / p99 (same; other) |\n| --- | --- | --- | --- |\n")
	raw := func(r *Row) string {
		if r == nil || r.RawP99us <= 0 {
			return "-"
		}
		return FormatMicros(r.RawP50us) + " / " + FormatMicros(r.RawP99us)
	}
	for _, name := range []string{"sqlite", "postgres", "json", "sqlite served", "postgres served"} {
		r := rec.run(name)
		if r == nil {
			continue
		}
		prefix, label := "", r.Backend+", a waiting inbox read"
		if r.Serve != "" {
			prefix, label = "via "+r.Serve+" ", r.Backend+" through a server, a long poll"
		}
		same, other := rec.row(name, "W8", prefix+"same handle", 1), rec.row(name, "W8", prefix+"other handle", 1)
		fmt.Fprintf(b, "| %s | %s | %s | %s; %s |\n", label, fmtP50P99(same), fmtP50P99(other), raw(same), raw(other))
	}
}

// renderServed is docs/performance.md's summary of the served runs: the
// workloads through a server on a unix socket against the same in
// process, and W1 from many processes.
func renderServed(b *strings.Builder, rec *Record) {
	procs, streams := 16, DefaultStreams
	if r := rec.run("sqlite served"); r != nil {
		procs, streams = r.Processes, r.Streams
	}
	via := "via unix"
	many := fmt.Sprintf("%s, %d processes", via, procs)
	cols := make([]string, len(servedBackends))
	for i, be := range servedBackends {
		cols[i] = be + " (unix)"
	}
	t := newTable(b, "", cols...)
	row := func(col, workload, variant string, c int) *Row {
		be, _, _ := strings.Cut(col, " ")
		return rec.row(be+" served", workload, variant, c)
	}
	t.line("W1 c=16 via the server: ops/s, ratio to in process", func(col string) string {
		r := row(col, "W1", via, 16)
		return fmtOps(r) + ", " + fmtRatio(r)
	})
	t.line("W1 c=16: CPU per op, served (in process)", func(col string) string {
		r := row(col, "W1", via, 16)
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%s (%s)", fmtMicros(r.CPUusPerOp), fmtMicros(r.RawCPUusPerOp))
	})
	t.line(fmt.Sprintf("W1 from %d processes at c=1 via the server: ops/s, ratio to c=%d in process, commits/op", procs, procs), func(col string) string {
		r := row(col, "W1", many, procs)
		return fmt.Sprintf("%s, %s, %s", fmtOps(r), fmtRatio(r), fmtCommits(r))
	})
	t.line("the same: the server's CPU per op (in process at the same concurrency; bare HTTP server)", func(col string) string {
		r, bare := row(col, "W1", many, procs), row(col, "HTTP", "bare "+many, procs)
		if r == nil {
			return "-"
		}
		bareCPU := 0.0
		if bare != nil {
			bareCPU = bare.CPUusPerOp
		}
		return fmt.Sprintf("%s (%s; %s)", fmtMicros(r.CPUusPerOp), fmtMicros(r.RawCPUusPerOp), fmtMicros(bareCPU))
	})
	t.line("the server's own CPU per op beyond the engine and the bare transport (target ≤ 30 µs)", func(col string) string {
		r, bare := row(col, "W1", many, procs), row(col, "HTTP", "bare "+many, procs)
		if r == nil || bare == nil || r.CPUusPerOp <= 0 || r.RawCPUusPerOp <= 0 || bare.CPUusPerOp <= 0 {
			return "-"
		}
		return FormatMicros(r.CPUusPerOp - r.RawCPUusPerOp - bare.CPUusPerOp)
	})
	machine := func(r *Row) string {
		if r == nil || r.MachineCPUusPerOp <= 0 {
			return "-"
		}
		return fmt.Sprintf("%s, %.0f%% busy", FormatMicros(r.MachineCPUusPerOp), 100*r.MachineBusy)
	}
	t.line("the machine's CPU per op, every process counted; its CPUs busy", func(col string) string {
		return machine(row(col, "W1", many, procs))
	})
	t.line("the bare HTTP exchange alone from the same processes: ops/s; the machine's CPU per op", func(col string) string {
		r := row(col, "HTTP", "bare "+many, procs)
		return fmtOps(r) + "; " + machine(r)
	})
	t.line(fmt.Sprintf("W1, the same %d processes each opening the store: ops/s (the served rate over it)", procs), func(col string) string {
		r := row(col, "W1", fmt.Sprintf("%d processes on the store", procs), procs)
		return fmt.Sprintf("%s (%s)", fmtOps(r), fmtRatio(r))
	})
	t.line("W2 get by name, c=1 via the server: p50 (in process)", func(col string) string {
		r := row(col, "W2", via, 1)
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%s (%s)", fmtP50(r), fmtMicros(r.RawP50us))
	})
	t.line("W4 hand-over through a long poll, p50: same / other handle", func(col string) string {
		return fmtP50(row(col, "W4", via+" handover same handle", 1)) + " / " + fmtP50(row(col, "W4", via+" handover other handle", 1))
	})
	t.line("W6 commit → SSE subscriber, p50 / p99: other handle; other process", func(col string) string {
		return fmtP50P99(row(col, "W6", via+" other handle", 1)) + "; " + fmtP50P99(row(col, "W6", via+" other process", 1))
	})
	t.line("W6 resume through the server: first event p50", func(col string) string {
		return fmtP50(row(col, "W6", via+" resume", 1))
	})
	t.line("W7 three-op batch via the server: ratio to in process, c=1 / c=16", func(col string) string {
		return fmtRatio(row(col, "W7", via, 1)) + " / " + fmtRatio(row(col, "W7", via, 16))
	})
	t.line(fmt.Sprintf("SSE: the server's memory per idle stream (%d streams), heap+stacks / RSS", streams), func(col string) string {
		r := row(col, "SSE", "idle streams", streams)
		if r == nil {
			return "-"
		}
		n := float64(r.Concurrency)
		return fmtKiB(r.HeapKiB/n) + " / " + fmtKiB(r.RSSKiB/n)
	})
	t.line(fmt.Sprintf("SSE: 5 events to %d streams, commit → each receipt, p50 / p99", streams), func(col string) string {
		return fmtP50P99(row(col, "SSE", "fan-out", streams))
	})
}

// renderFull writes the runs' whole tables, as `wsctl bench` prints them:
// the in-process runs, or the served ones.
func renderFull(b *strings.Builder, rec *Record, served bool) {
	first := true
	for _, r := range rec.Runs {
		if (r.Serve != "") != served {
			continue
		}
		if !first {
			b.WriteString("\n")
		}
		first = false
		fmt.Fprintf(b, "### %s\n\n", runTitle(r))
		fmt.Fprintf(b, "`%s`\n\n", runCommand(rec, r))
		b.WriteString("```\n")
		_ = WriteTable(b, r.Rows)
		b.WriteString("```\n")
	}
}

// backendTitle names a backend for people.
func backendTitle(be string) string {
	switch be {
	case "sqlite":
		return "SQLite"
	case "postgres":
		return "PostgreSQL"
	case "json":
		return "JSON"
	}
	return be
}

// runTitle heads a run's full table.
func runTitle(r RecordRun) string {
	be := backendTitle(r.Backend)
	switch {
	case r.Serve != "":
		return fmt.Sprintf("%s through a server on a %s socket, W1 also from %d processes", be, r.Serve, r.Processes)
	case r.Shared:
		return fmt.Sprintf("%s, %s on %d shared handles: one store, group commit across them", be, strings.Join(r.Workloads, ","), r.Handles)
	case len(r.Workloads) == 1 && r.Workloads[0] == "W3":
		return fmt.Sprintf("%s, W3 at %s artifacts", be, thousands(r.Artifacts))
	}
	return fmt.Sprintf("%s, %d private handles", be, r.Handles)
}

// runCommand is the `wsctl bench` command that makes run r alone, on a
// store the reader names.
func runCommand(rec *Record, r RecordRun) string {
	dsn := map[string]string{
		"sqlite":   "sqlite:/tmp/b/ws.db",
		"json":     "json:/tmp/b/ws",
		"postgres": "'postgres://…&ws_schema=b'",
	}[r.Backend]
	args := []string{"wsctl", "--dsn", dsn, "bench", "--duration", rec.Duration, "--workloads", strings.Join(r.Workloads, ",")}
	if r.Shared {
		args = append(args, "--shared")
	}
	if r.Artifacts != 10000 {
		args = append(args, "--artifacts", strconv.Itoa(r.Artifacts))
	}
	if r.Tasks != 10000 {
		args = append(args, "--tasks", strconv.Itoa(r.Tasks))
	}
	if r.Serve != "" {
		args = append(args, "--serve", r.Serve, "--processes", strconv.Itoa(r.Processes))
		if r.Streams != DefaultStreams {
			args = append(args, "--streams", strconv.Itoa(r.Streams))
		}
	}
	return strings.Join(args, " ")
}
