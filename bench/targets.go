package bench

import (
	"fmt"
	"strings"
)

// target is one line of the targets table: what a record measured for it
// and whether that met it. met is false when a row is missing.
type target struct {
	name string
	eval func(rec *Record) (measured string, met bool)
}

// all reports whether every row is there and passes.
func all(rows []*Row, pass func(*Row) bool) bool {
	for _, r := range rows {
		if r == nil || !pass(r) {
			return false
		}
	}
	return len(rows) > 0
}

func ratioAtLeast(min float64) func(*Row) bool {
	return func(r *Row) bool { return r.Ratio >= min }
}

// targets are the suite's targets (issue 7's), each decided by the rows
// of one record; the targets against etcd need its run and are not here.
var targets = []target{
	{"Postgres W1 c=1 ≥ 1.0x the raw three-statement transaction", func(rec *Record) (string, bool) {
		p, s := rec.row("postgres", "W1", "", 1), rec.row("postgres shared", "W1", "", 1)
		return fmt.Sprintf("private %s, shared %s", fmtRatio(p), fmtRatio(s)), all([]*Row{p, s}, ratioAtLeast(1))
	}},
	{"Postgres W1 c=16 ≥ 0.8x raw + pg_notify", func(rec *Record) (string, bool) {
		p, s := rec.row("postgres", "W1", "vs raw+notify", 16), rec.row("postgres shared", "W1", "vs raw+notify", 16)
		return fmt.Sprintf("private %s, shared %s", fmtRatio(p), fmtRatio(s)), all([]*Row{p, s}, ratioAtLeast(0.8))
	}},
	{"SQLite W1 ≥ 0.7x raw, c=1 and c=16", func(rec *Record) (string, bool) {
		rows := []*Row{rec.row("sqlite", "W1", "", 1), rec.row("sqlite shared", "W1", "", 1), rec.row("sqlite", "W1", "", 16), rec.row("sqlite shared", "W1", "", 16)}
		return fmt.Sprintf("c=1 private %s, shared %s; c=16 private %s, shared %s", fmtRatio(rows[0]), fmtRatio(rows[1]), fmtRatio(rows[2]), fmtRatio(rows[3])),
			all(rows, ratioAtLeast(0.7))
	}},
	{"JSON W1 ≥ 0.5x raw replace + append", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, name := range []string{"json", "json shared"} {
			var cells []string
			for _, c := range DefaultConcurrency {
				r := rec.row(name, "W1", "", c)
				rows = append(rows, r)
				cells = append(cells, fmtRatio(r))
			}
			parts = append(parts, strings.Join(cells, " / "))
		}
		return "c=1 / 4 / 16: private " + parts[0] + "; shared " + parts[1], all(rows, ratioAtLeast(0.5))
	}},
	{"commits per op at c=16, shared handles, ≤ 0.25 (group commit)", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, be := range docsBackends {
			r := rec.row(be+" shared", "W1", "", 16)
			rows = append(rows, r)
			parts = append(parts, be+" "+fmtCommits(r))
		}
		return strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.CommitsPerOp <= 0.25 })
	}},
	{"W4 contended hand-over ≤ 5 ms p50", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, be := range docsBackends {
			s, o := rec.row(be, "W4", "handover same handle", 1), rec.row(be, "W4", "handover other handle", 1)
			rows = append(rows, s, o)
			parts = append(parts, fmt.Sprintf("%s %s / %s", be, fmtP50(s), fmtP50(o)))
		}
		return "same / other handle: " + strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.P50us <= 5000 })
	}},
	{"W6 in process ≤ 1 ms p50", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, be := range docsBackends {
			r := rec.row(be, "W6", "same handle", 1)
			rows = append(rows, r)
			parts = append(parts, be+" "+fmtP50P99(r))
		}
		return "same handle p50 / p99: " + strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.P50us <= 1000 })
	}},
	{"W6 across processes, SQLite and JSON: p99 ≤ the poll interval (50 ms) + 5 ms", func(rec *Record) (string, bool) {
		s, j := rec.row("sqlite", "W6", "other process", 1), rec.row("json", "W6", "other process", 1)
		return fmt.Sprintf("other process p50 / p99: sqlite %s, json %s", fmtP50P99(s), fmtP50P99(j)),
			all([]*Row{s, j}, func(r *Row) bool { return r.P99us <= 55000 })
	}},
	{"W6 Postgres p99 ≤ 3x the raw insert + notify → LISTEN p99", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, v := range []string{"other handle", "other pool", "other process"} {
			r := rec.row("postgres", "W6", v, 1)
			rows = append(rows, r)
			cell := "-"
			if r != nil {
				cell = fmt.Sprintf("%s vs %s", FormatMicros(r.P99us), FormatMicros(r.RawP99us))
			}
			parts = append(parts, v+" "+cell)
		}
		return strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.P99us <= 3*r.RawP99us })
	}},
	{"W3 on the SQL backends: p50 ≤ 5 ms at either size", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, be := range []string{"sqlite", "postgres"} {
			small, big := rec.row(be, "W3", "", 1), rec.row(be+" 100k", "W3", "", 1)
			rows = append(rows, small, big)
			parts = append(parts, fmt.Sprintf("%s %s / %s", be, fmtP50(small), fmtP50(big)))
		}
		return "c=1 p50, small / large: " + strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.P50us <= 5000 })
	}},
	{"W6 resume: first event ≤ 5 ms p50", func(rec *Record) (string, bool) {
		var rows []*Row
		var parts []string
		for _, be := range docsBackends {
			r := rec.row(be, "W6", "resume", 1)
			rows = append(rows, r)
			parts = append(parts, be+" "+fmtP50(r))
		}
		return strings.Join(parts, ", "), all(rows, func(r *Row) bool { return r.P50us <= 5000 })
	}},
	{"a subscriber's memory is bounded: 100 subscribers hold no more after 2000 events than 1.25x after 1000", func(rec *Record) (string, bool) {
		ok := true
		var parts []string
		for _, be := range docsBackends {
			a, b := rec.row(be, "MEM", "subscribers after 1000 events", 100), rec.row(be, "MEM", "subscribers after 2000 events", 100)
			if a == nil || b == nil {
				ok = false
				parts = append(parts, be+" -")
				continue
			}
			ok = ok && b.HeapKiB <= 1.25*max(a.HeapKiB, 1)
			parts = append(parts, fmt.Sprintf("%s %s → %s", be, fmtKiB(a.HeapKiB/float64(a.Concurrency)), fmtKiB(b.HeapKiB/float64(b.Concurrency))))
		}
		return "heap + stacks per subscriber: " + strings.Join(parts, ", "), ok
	}},
}

// renderTargets writes each target, what the record measured for it, and
// whether that met it.
func renderTargets(b *strings.Builder, rec *Record) {
	b.WriteString("| target | measured | met |\n| --- | --- | --- |\n")
	for _, t := range targets {
		measured, met := t.eval(rec)
		verdict := "no"
		if met {
			verdict = "yes"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", t.name, measured, verdict)
	}
}
