package workspace

import (
	"context"
	"io"
)

// ArchiveFormat and ArchiveVersion name the archive format in its header.
//
// The archive (Export, Import) is a whole workspace as NDJSON, one record
// per line, for moving a team between backends (json -> sqlite -> postgres)
// and for backups. Every line is a JSON object whose "type" says what it
// is; a record line carries one record under its own key, in the JSON
// shape every face shares (docs/schema/workspace.schema.json). Lines come
// in this order:
//
//	{"type":"header","format":"agentspace-archive","version":3}
//	{"type":"task","task":{...}}          every task, by id (so dependencies and parents come first)
//	{"type":"note","note":{...}}          every note, by kind then key
//	{"type":"artifact","artifact":{...}}  every version of every artifact: artifacts by id
//	                                      (creation order), versions ascending; "content" only
//	                                      on the first version with each distinct sha256
//	{"type":"artifact_deleted","id":...}  right after the last version of a deleted artifact
//	{"type":"lease","lease":{...}}        every lease row, live, expired or released, by resource
//	                                      (released rows keep the newest token, so tokens keep growing)
//	{"type":"log","floor":F,"head":H,"floor_hash":"..."}
//	                                      floor_hash: the hash the floor's event chains from
//	{"type":"event","event":{...},"hash":"..."}
//	                                      every event from the floor to the head, by seq,
//	                                      with its link in the log's hash chain (hex; see
//	                                      driver.ChainHash), checked by Import
//	{"type":"end","counts":{...}}         record counts: a truncated archive is refused
//
// Times are RFC 3339 in UTC with up to microsecond precision. Export is
// deterministic: importing an archive into an empty store of any backend
// and exporting it again gives the same bytes. Import also reads version 2
// (no hashes: the store chains the events anew) and version 1, whose
// records kept their fields next to "type" (an event's type in "event")
// and their content in base64.
//
// Idempotency keys are not archived (they are short-lived retry guards).
// Deleted artifacts and released lease rows are found through the event
// log; those whose every event was compacted away are not exported.
const (
	ArchiveFormat  = "agentspace-archive"
	ArchiveVersion = 3
)

// ArchiveOptions tune Export and Import.
type ArchiveOptions struct {
	// Progress, if set, is called every ProgressEvery records and once at
	// the end, with the counts so far.
	Progress func(ArchiveStats)
	// ProgressEvery is how many records pass between Progress calls (default 1000).
	ProgressEvery int
	// WithSealed lets Import restore the records that are credentials:
	// the server's token records, each of which acts as its actor with
	// its role. Without it Import leaves them out and counts them in
	// ArchiveStats.SkippedSealed, so an archive (a backup, or one crafted)
	// grants nobody access unless its restorer asks for that. Other
	// sealed records (messages, pauses) are always restored. Every program
	// knows which kinds these are, whatever it links.
	WithSealed bool
}

// ArchiveStats counts the records of an archive.
type ArchiveStats struct {
	Tasks            int64 `json:"tasks"`
	Notes            int64 `json:"notes"`
	Artifacts        int64 `json:"artifacts"`         // artifacts, live or deleted
	Versions         int64 `json:"versions"`          // artifact versions
	DeletedArtifacts int64 `json:"deleted_artifacts"` // artifacts that are deleted
	Leases           int64 `json:"leases"`
	Events           int64 `json:"events"`
	ContentBytes     int64 `json:"content_bytes"` // bytes of content stored (each distinct blob once)
}

// Records is the number of record lines counted.
func (s ArchiveStats) Records() int64 {
	return s.Tasks + s.Notes + s.Versions + s.DeletedArtifacts + s.Leases + s.Events
}

// ImportReport is what Import wrote, and what it could not vouch for or
// left out.
type ImportReport struct {
	ArchiveStats // the records written (Notes leaves out SkippedSealed)
	// Unchained counts the events that came without their hash (archives
	// of format versions 1 and 2, or events from before the exporting
	// store kept its chain): nothing checked their content or order
	// against the exporting store's log, and the store chained them anew.
	Unchained int64 `json:"unchained"`
	// SkippedSealed counts the records that are credentials (token records) left
	// out because ArchiveOptions.WithSealed was not set.
	SkippedSealed int64 `json:"skipped_sealed"`
}

// archiver is the conn capability Export and Import use.
type archiver interface {
	Export(ctx context.Context, w io.Writer, opts ArchiveOptions) (ArchiveStats, error)
	Import(ctx context.Context, r io.Reader, opts ArchiveOptions) (ImportReport, error)
}

// Export writes the whole workspace to w as an archive (see
// ArchiveFormat), read from one consistent snapshot. It returns what it
// wrote.
func (ws *Workspace) Export(ctx context.Context, w io.Writer, opts ArchiveOptions) (ArchiveStats, error) {
	a, ok := ws.c.(archiver)
	if !ok {
		return ArchiveStats{}, ws.unsupported("export")
	}
	return a.Export(ctx, w, opts)
}

// Import loads an archive written by Export into the store behind ws,
// keeping every id, version, timestamp, token and event seq. The store must
// be empty (no events, no records): anything else is an *InvalidError and
// nothing is written. Every record is validated before the store sees it,
// and every event that carries its hash is checked against the chain; the
// report counts those that did not, and the sealed records left out (see
// ArchiveOptions.WithSealed).
//
// A small archive is written in one transaction. A large one is written in
// several (about 64 MiB of content or 10,000 records each); if one of them
// fails, the error says so, and the store must be emptied before importing
// again. Nobody else should write to the store while it is imported.
func (ws *Workspace) Import(ctx context.Context, r io.Reader, opts ArchiveOptions) (ImportReport, error) {
	a, ok := ws.c.(archiver)
	if !ok {
		return ImportReport{}, ws.unsupported("import")
	}
	return a.Import(ctx, r, opts)
}
