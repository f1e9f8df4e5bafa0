package bench

import (
	"fmt"
	"strings"
)

// The CLI region ("cli") of docs/performance.md is rendered from a record
// of its own, made by `wsctl bench docs --cli` (DocsConfig.CLI): the
// commands of a shell agent's step as whole wsctl processes on SQLite, at
// DocsConfig.Tasks tasks directly and through a server on loopback TCP,
// and at DocsConfig.CLIBigTasks tasks. It takes minutes, where a full
// docs run takes most of an hour, so the two records are made apart.

// cliRuns are the runs of a CLI record, by name.
const (
	cliRun    = "cli"
	cliBigRun = "cli big"
)

// cliPlan is DocsPlan for DocsConfig.CLI.
func cliPlan(cfg DocsConfig) []RecordRun {
	run := func(name string, tasks int, serve string) RecordRun {
		return RecordRun{Name: name, Backend: "sqlite", Workloads: []string{"CLI"}, Tasks: tasks, Serve: serve, CLIRuns: cfg.CLIRuns}
	}
	return []RecordRun{run(cliRun, cfg.Tasks, "tcp"), run(cliBigRun, cfg.CLIBigTasks, "")}
}

// cliTarget is the p50 bound for a command of the CLI row at
// 10,000 tasks and at 100,000 (0: none), and the most a server may add.
type cliTarget struct{ small, big float64 }

// cliTargets are the p50 targets, in µs, of the commands of cliSteps that
// have one; through a server a command may take cliServedExtra more.
var cliTargets = map[string]cliTarget{
	"version":                   {10000, 10000},
	"task add":                  {15000, 15000},
	"task claim":                {15000, 15000},
	"task done":                 {15000, 15000},
	"artifact put":              {15000, 15000},
	"task ls --ready --limit 5": {20000, 25000},
}

const cliServedExtra = 5000

// coveredBy reports whether rec holds what region name renders: the cli
// region renders from a CLI record only, the growth region from a growth
// record only, every other region from a full docs run only.
// UpdateRegions leaves a region rec does not cover as it is.
func coveredBy(name string, rec *Record) bool {
	switch {
	case rec.run(cliRun) != nil:
		return name == "cli"
	case len(rec.growthRuns()) > 0:
		return name == "growth"
	}
	return name != "cli" && name != "growth"
}

// renderCLI is the cli region: each command's p50 wall time and median CPU
// per process, directly and through a server, at both sizes, against its
// target; met also needs the served p50 within cliServedExtra of the
// direct one.
func renderCLI(b *strings.Builder, rec *Record) {
	small, big := rec.run(cliRun), rec.run(cliBigRun)
	sizeOf := func(r *RecordRun) string {
		if r == nil {
			return "-"
		}
		return thousands(r.Tasks)
	}
	served := "server"
	if small != nil && small.Serve != "" {
		served = "via " + small.Serve
	}
	fmt.Fprintf(b, "| command | %s tasks: p50 | CPU | %s: p50 | CPU | %s tasks: p50 | CPU | target: p50 (%s / %s) | met |\n",
		sizeOf(small), served, sizeOf(big), sizeOf(small), sizeOf(big))
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, st := range cliSteps {
		direct, via, large := rec.row(cliRun, "CLI", st.name, 0), rec.row(cliRun, "CLI", st.name+" "+served, 0), rec.row(cliBigRun, "CLI", st.name, 0)
		target, met := "-", "-"
		if t, ok := cliTargets[st.name]; ok {
			target = FormatMicros(t.small)
			if t.big != t.small {
				target += " / " + FormatMicros(t.big)
			}
			met = yesNo(direct != nil && via != nil && large != nil &&
				direct.P50us <= t.small && large.P50us <= t.big && via.P50us <= direct.P50us+cliServedExtra)
		}
		cpu := func(r *Row) string {
			if r == nil {
				return "-"
			}
			return fmtMicros(r.CPUusPerOp)
		}
		fmt.Fprintf(b, "| `wsctl %s` | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			st.name, fmtP50(direct), cpu(direct), fmtP50(via), cpu(via), fmtP50(large), cpu(large), target, met)
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
