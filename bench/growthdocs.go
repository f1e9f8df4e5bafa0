package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// The growth region ("growth") of docs/performance.md is rendered from a
// record of its own, made by `wsctl bench docs --growth`
// (DocsConfig.Growth): the GROWTH workload on SQLite and PostgreSQL at
// DocsConfig.GrowthEvents, and on json at those up to
// MaxJSONGrowthEvents, the most it is meant to hold, and at that. Filling a million events takes minutes on
// each backend, where the CLI region's run takes seconds and a full docs
// run most of an hour, so each has its record.

// DocsGrowthEvents are the sizes a growth docs run measures at by
// default: the curve's three points.
var DocsGrowthEvents = []int64{10_000, 100_000, 1_000_000}

// growthRunPrefix begins the name of every run of a growth record.
const growthRunPrefix = "growth "

// growthPlan is DocsPlan for DocsConfig.Growth.
func growthPlan(cfg DocsConfig) []RecordRun {
	var plan []RecordRun
	for _, b := range docsBackends {
		sizes := cfg.GrowthEvents
		if b == "json" {
			// The sizes it holds, and beyond them as far as it holds.
			sizes = nil
			for _, s := range cfg.GrowthEvents {
				if s <= MaxJSONGrowthEvents {
					sizes = append(sizes, s)
				}
			}
			if len(sizes) > 0 && len(sizes) < len(cfg.GrowthEvents) && sizes[len(sizes)-1] < MaxJSONGrowthEvents {
				sizes = append(sizes, MaxJSONGrowthEvents)
			}
			if len(sizes) < 2 {
				continue
			}
		}
		plan = append(plan, RecordRun{Name: growthRunPrefix + b, Backend: b, Workloads: []string{"GROWTH"},
			Tasks: cfg.GrowthTasks, GrowthEvents: sizes})
	}
	return plan
}

// growthRuns are rec's growth runs, in the order they ran.
func (rec *Record) growthRuns() []*RecordRun {
	var runs []*RecordRun
	for i := range rec.Runs {
		if strings.HasPrefix(rec.Runs[i].Name, growthRunPrefix) {
			runs = append(runs, &rec.Runs[i])
		}
	}
	return runs
}

// renderGrowth is the growth region: for each backend, each operation's
// p50 at every size (the curve), the largest size's against the
// smallest's and that ratio against GrowthFlat; then the whole-store
// operations, each in seconds per million events at every size.
func renderGrowth(b *strings.Builder, rec *Record) {
	runs := rec.growthRuns()
	b.WriteString("| backend | operation | p50 at each size (events) | largest / smallest | flat (at most " +
		strconv.FormatFloat(GrowthFlat, 'f', -1, 64) + "x) |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, r := range runs {
		small, large := growthSizes(r)
		for _, name := range growthMeasures {
			cells := make([]string, len(r.GrowthEvents))
			for i, size := range r.GrowthEvents {
				cells[i] = fmt.Sprintf("%s (%s)", fmtP50(growthRow(r, name, size)), countLabel(size))
			}
			s, l := growthRow(r, name, small), growthRow(r, name, large)
			ratio, flat := "-", "-"
			if s != nil && l != nil && s.P50us > 0 {
				x := l.P50us / s.P50us
				ratio = fmt.Sprintf("%.2fx", x)
				flat = yesNo(x <= GrowthFlat)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", backendTitle(r.Backend), name, strings.Join(cells, ", "), ratio, flat)
		}
	}
	b.WriteString("\nThe whole-store operations, once each over the store as it then is, in\nseconds per million events of its log:\n\n")
	b.WriteString("| backend | operation | at each size (events) |\n")
	b.WriteString("| --- | --- | --- |\n")
	for _, r := range runs {
		for _, name := range growthAdmin {
			cells := make([]string, len(r.GrowthEvents))
			for i, size := range r.GrowthEvents {
				cells[i] = fmt.Sprintf("%s (%s)", perMillion(growthRow(r, name, size)), countLabel(size))
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", backendTitle(r.Backend), name, strings.Join(cells, ", "))
		}
	}
}

// growthSizes are a growth run's smallest and largest sizes.
func growthSizes(r *RecordRun) (small, large int64) {
	if len(r.GrowthEvents) == 0 {
		return 0, 0
	}
	return r.GrowthEvents[0], r.GrowthEvents[len(r.GrowthEvents)-1]
}

// growthRow is a growth run's row of operation name at size, or nil.
func growthRow(r *RecordRun, name string, size int64) *Row {
	v := name + " at " + countLabel(size) + " events"
	for i := range r.Rows {
		if r.Rows[i].Workload == "GROWTH" && r.Rows[i].Variant == v {
			return &r.Rows[i]
		}
	}
	return nil
}

// perMillion is a whole-store row's seconds per million events: its rate
// is events per second.
func perMillion(r *Row) string {
	if r == nil || r.OpsPerSec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", 1e6/r.OpsPerSec)
}
