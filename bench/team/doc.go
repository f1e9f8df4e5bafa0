// Package team plays a team's day against a workspace: N agent processes
// that claim and finish tasks, write their own artifacts, increment hot
// counters with compare-and-set, take leases and write under their fencing
// tokens, send each other messages and acknowledge them, and put notes,
// with a mix and a think time the caller sets. It runs for a duration or
// until the log has grown by a number of events, optionally kills one of
// the servers it started or runs a failover command mid-run, then checks
// every invariant the workspace promises against what the agents were
// acknowledged and what a follower of the log saw, and writes a report
// (report.json, report.md and SVG charts).
//
// The agents are processes, not goroutines: Run starts each with
// Config.Agent (wsctl re-executes itself as `wsctl bench team --agent`),
// writes it an AgentSpec as one JSON line on its stdin, and reads one
// Record per line from its stdout until it closes its stdin. RunAgent is
// the agent's side.
//
// `wsctl bench team` is the command; bench/README.md documents it.
package team
