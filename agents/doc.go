// Package agents holds what a team's operators do to its agents, for
// every face to call: bearer tokens (create, list, revoke, verify; kept as
// sealed notes of the workspace, so every server on one store accepts the
// same ones), each agent's state (working, stale, idle, gone) with what it
// holds and did lately, and stopping an agent that has gone wrong in one
// batch (its tokens revoked, its leases ended, its claims returned).
// Pausing an agent is a batch op of the workspace (PauseActorOp). The HTTP
// server, the dashboard, MCP and wsctl all call this package; none keeps
// its own copy of these records or rules.
package agents
