package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes rows for people, one line per row, the note last: the
// table `wsctl bench` prints and the docs' full tables show.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tBACKEND\tC\tOPS/S\tP50\tP99\tRAW OPS/S\tRAW P99\tRATIO\tCOMMITS/OP\tCPU/OP (RAW)\tNOTE")
	for _, r := range rows {
		name := r.Workload
		if r.Variant != "" {
			name += " " + r.Variant
		}
		raw, rawP99, ratio := "-", "-", "-"
		if r.RawOpsPerSec > 0 {
			raw, rawP99 = fmt.Sprintf("%.0f", r.RawOpsPerSec), FormatMicros(r.RawP99us)
		}
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		commits := "-"
		if r.CommitsPerOp > 0 {
			commits = fmt.Sprintf("%.2f", r.CommitsPerOp)
			if r.WALSyncsPerOp > 0 {
				commits += fmt.Sprintf(" (wal_sync %.2f, raw %.2f)", r.WALSyncsPerOp, r.RawWALSyncsPerOp)
			}
		}
		cpu := "-"
		switch {
		case r.CPUusPerOp > 0 && r.RawCPUusPerOp > 0:
			cpu = fmt.Sprintf("%s (%s)", FormatMicros(r.CPUusPerOp), FormatMicros(r.RawCPUusPerOp))
		case r.CPUusPerOp > 0:
			cpu = FormatMicros(r.CPUusPerOp)
		}
		ops, p50, p99 := fmt.Sprintf("%.0f", r.OpsPerSec), FormatMicros(r.P50us), FormatMicros(r.P99us)
		if r.OpsPerSec == 0 && r.P99us == 0 {
			ops, p50, p99 = "-", "-", "-" // MEM rows: the figures are in the note
		}
		note := r.Note
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			name, r.Backend, r.Concurrency, ops, p50, p99, raw, rawP99, ratio, commits, cpu, note)
	}
	return tw.Flush()
}

// FormatMicros formats a time in microseconds for people: 14µs, 1.29ms,
// 12.7ms.
func FormatMicros(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fms", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fms", v/1000)
	default:
		return fmt.Sprintf("%.0fµs", v)
	}
}
