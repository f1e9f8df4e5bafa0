// Package dashboard serves the workspace's live web dashboard: a task
// board, locks, the event feed, artifacts with their history and diffs,
// notes by kind, the agents at work, a timeline and charts of the team's
// flow drawn as SVG from the event log, and the open shadows and change
// sets.
//
// Pages are rendered on the server with html/template; the vendored htmx
// and its Server-Sent Events extension (embedded, with their licenses, so
// the page works offline) swap in fresh fragments when the stream at
// /ui/stream says a view changed. Every read is a call of the public
// workspace API, the same one the CLI and the HTTP API make, and the
// stream is fed by one event subscription per Handler, shared by every
// open page: nothing polls the store.
//
// The dashboard is read-only by default. Operator actions (release a
// lock, requeue a task, retry a failed one) need a token, presented as a
// bearer header or through the login form's cookie; a form posted with the
// cookie must carry the page's CSRF token. Each action is one workspace
// write as the token's actor and role, so where the workspace has a policy
// the engine decides it (a refusal is a 403, nothing written) and it is in
// the event log like any other; where it has none, only a token whose role
// is policy.AdminRole may act.
package dashboard
