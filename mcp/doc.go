// Package mcp serves a workspace to coding agents over the Model Context
// Protocol, with the official Go SDK.
//
// A Server offers a small set of coarse tools (status, artifact_read,
// artifact_write, artifact_list, task_add, task_claim, task_update,
// task_list, note, lock, events_wait, inbox, message, agents), each a thin
// adapter over calls of the public workspace API (and, for agents, of
// package agents, which the HTTP API and wsctl call too): the CLI, the
// HTTP API and these tools cannot disagree about state because they run
// the same operations. Results are the workspace records in their one
// JSON shape, as structured content and as text. A failed call is a tool
// error (isError) whose structured content is a ToolError: the class
// (conflict, locked, not_found, no_task, invalid, ...), the details an
// agent acts on (the current version, the lock's holder and expiry, the
// bad field) and a hint.
//
// Artifacts are also resources, agentspace://artifact/NAME; a client
// subscribed to one is sent notifications/resources/updated when it
// changes.
//
// Who a call acts as depends on the transport: Options.Actor for stdio
// (wsctl mcp --as NAME), the caller's token for HTTP (wsctl serve's /mcp).
// Prime writes the start-of-work briefing that `wsctl prime` prints.
package mcp
