// Package faces is the one table of what a caller may not do, whatever face
// it comes through: its test drives every forbidden action through every
// face (the Go API, HTTP, MCP over HTTP and over stdio, the dashboard's
// actions, the remote client, the CLI) against one real `wsctl serve`, and
// requires the same refusal from each and a log that moved by nothing but
// the refusals' own "denied" records. A face added to the test's list
// inherits every check; an action added to the list is tried on every face.
// A face that cannot ask for an action proves it (no such tool, field or
// command), so a face that gains the means fails the test until its row
// is written.
package faces
