// Package policy holds a workspace's roles and rules: it parses a policy
// file (TOML), compiles it once, and answers whether an actor may do an
// action on an object. It imports nothing of agentspace's own: the engine
// (package workspace/engine) calls it on every operation, the CLI and the
// hooks call it to explain and to check ahead.
//
// A policy names roles, each a set of rules, and maps actors to roles:
//
//	default_role = "reader"           # for actors not listed; omit: no rights
//
//	[roles.reader]
//	artifacts_read = ["**"]
//	notes_read     = ["*"]
//
//	[roles.planner]
//	artifacts_read  = ["**"]
//	artifacts_write = ["plans/**"]    # create, update, roll back
//	artifacts_delete = ["plans/**"]   # omitted: the same as artifacts_write
//	notes_read  = ["*"]
//	notes_write = ["decision"]        # note kinds
//	tasks = ["add", "claim", "finish", "others"]
//	locks = ["artifact:plans/**"]     # lock resources
//	admin = ["compact"]               # policy, compact, import, tokens, export
//
//	[actors]
//	alice = ["planner"]
//	"impl-*" = ["implementer"]        # a pattern: every actor it matches
//	root  = ["admin"]                 # the built-in role with every right
//
// Patterns are paths split at "/": "*" matches any run of characters
// within one segment, "**" (a whole segment) matches any number of
// segments, none included. So "src/**" matches "src", "src/a.go" and
// "src/a/b.go", and "*.md" matches "a.md" but not "docs/a.md".
package policy
