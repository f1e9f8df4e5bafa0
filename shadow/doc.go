// Package shadow lets an agent work on a copy and promote its changes only
// when they pass the team's rules, all at once.
//
// A Manager keeps shadows of directories: Open copies a directory (by
// reflink where the file system has them, never by hard link) and records
// its base manifest; Diff lists what changed; Validate checks every changed
// path against the task's areas (Task.Areas), the workspace's policy (the
// engine's rule for writing that artifact name, workspace.WriteCheck),
// others' leases on file:PATH and the configured commands, and binds the
// outcome to the diff's hash; Promote applies exactly that diff to the
// real directory, all or nothing, through a journal that a later call
// finishes or undoes after a crash; Discard drops the shadow or only the
// files that broke a rule; GC removes shadows whose task ended.
//
// ChangeSets does the same for artifacts: changes are staged in a note,
// out of artifact reads, and promoted as one Workspace.Commit batch
// conditioned on each artifact's start version, so it holds on every
// backend.
//
// Every step is recorded in the workspace as a put of the shadow's (or
// set's) note whose event message names the step (shadow.opened,
// shadow.validated, shadow.promoted, …), and each promotion's unified diff
// is kept as an artifact. See docs/shadows.md.
package shadow
