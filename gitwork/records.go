package gitwork

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentspace/agentspace/internal/reserve"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// NoteKind is the kind of the notes that hold worktree records, keyed by
// task id. Their note.put events are the worktrees' history.
const NoteKind = "worktree"

// recordKey is the capability to write worktree records: the kind is
// reserved, so no face but this package's operations can plant one.
var recordKey = reserve.Own(NoteKind, nil)

// Status is a worktree's place in its life cycle:
//
//	active -> submitted -> merging -> merged -> released
//	                               -> conflicted | failed -> active (resubmit after a fix) or released
//	merging -> submitted (a merger died, or the integration branch moved: retried)
type Status string

// The statuses, in life-cycle order.
const (
	StatusActive     Status = "active"     // created; the agent works in it
	StatusSubmitted  Status = "submitted"  // queued for the merger
	StatusMerging    Status = "merging"    // a merger built a candidate and is validating it
	StatusMerged     Status = "merged"     // the integration branch holds it
	StatusConflicted Status = "conflicted" // it does not merge cleanly; Detail names the files
	StatusFailed     Status = "failed"     // validation failed; Detail holds the output
	StatusReleased   Status = "released"   // the worktree and branch are gone
)

// Worktree is the workspace's record of one task's worktree. Its JSON is
// the body of a note of kind NoteKind keyed by the task id.
type Worktree struct {
	Task        string    `json:"task"`
	Agent       string    `json:"agent"`
	Path        string    `json:"path"`
	Branch      string    `json:"branch"`
	Base        string    `json:"base"` // the integration commit the branch started from
	Head        string    `json:"head"` // the branch's commit when submitted
	Status      Status    `json:"status"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"` // the submitter's clock: shown, never used to order
	// SubmitVersion is the record's note version the submission wrote;
	// the seq of that note.put event is the entry's place in the queue.
	SubmitVersion int64 `json:"submit_version,omitempty"`
	// QueueSeq is that seq, filled in by List for queued entries (0:
	// not queued, or its event is no longer in the log); never stored.
	QueueSeq  int64  `json:"queue_seq,omitempty"`
	Patch     string `json:"patch"`     // the artifact holding git diff base...head
	Candidate string `json:"candidate"` // the commit under validation (merging)
	Onto      string `json:"onto"`      // the integration commit the candidate was built on
	Merged    string `json:"merged"`    // the integration commit that took it
	Attempts  int    `json:"attempts"`  // how many times a merger took it up
	Merger    string `json:"merger"`
	Detail    string `json:"detail"` // conflicting files, failing output, or why it was retried
	Backup    string `json:"backup"` // a ref keeping unmerged work of a released worktree
	// PerAgent: the worktree and branch are its agent's, reused across
	// tasks; releasing the record leaves them in place.
	PerAgent  bool      `json:"per_agent,omitempty"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Claimed is a task claimed with its worktree: what task claim with a
// worktree answers, on every face.
type Claimed struct {
	Task     workspace.Task `json:"task"`
	Worktree Worktree       `json:"worktree"`
}

// maxDetail bounds the output kept in a record.
const maxDetail = 16 << 10

// get reads the record of task, ErrNotFound if it has none.
func get(ctx context.Context, ws *workspace.Workspace, task string) (Worktree, error) {
	n, err := ws.Notes().Get(ctx, NoteKind, task)
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree of task %s: %w", task, err)
	}
	return decode(n)
}

func decode(n workspace.Note) (Worktree, error) {
	var w Worktree
	if err := json.Unmarshal([]byte(n.Body), &w); err != nil {
		return Worktree{}, fmt.Errorf("worktree record %s: corrupt body: %w", n.Key, err)
	}
	w.Version, w.UpdatedAt, w.QueueSeq = n.Version, n.UpdatedAt, 0
	return w, nil
}

// put writes w if the stored record is still at w.Version (0: whatever
// is stored; a new record is written only by the task's claimer), and
// returns it with its new version. msg goes to the event log.
func put(ctx context.Context, ws *workspace.Workspace, actor string, w Worktree, msg string) (Worktree, error) {
	if len(w.Detail) > maxDetail {
		w.Detail = "…" + w.Detail[len(w.Detail)-maxDetail:]
	}
	w.Detail = strings.ToValidUTF8(w.Detail, "?")
	w.QueueSeq = 0
	body, err := json.Marshal(w)
	if err != nil {
		return w, err
	}
	n, err := ws.Notes().Put(recordKey.Grant(ctx), workspace.Write{Actor: actor, IfVersion: w.Version, Message: msg},
		workspace.NotePut{Kind: NoteKind, Key: w.Task, Title: fmt.Sprintf("%s %s", w.Status, w.Branch), Body: string(body)})
	if err != nil {
		return w, fmt.Errorf("worktree of task %s: %w", w.Task, err)
	}
	return decode(n)
}

// List returns every worktree record: queued ones (submitted, merging,
// merged) first, in submission order, then the rest by when they were
// submitted and by task id.
//
// Submission order is the workspace's event order: the seq of the
// note.put event that queued the entry, which is total and gap-free
// across hosts, whatever their clocks say. An entry whose event is gone
// from the log (compacted) or that predates SubmitVersion sorts before
// the others, by its submitter's clock.
func List(ctx context.Context, ws *workspace.Workspace) ([]Worktree, error) {
	var out []Worktree
	f := workspace.NoteFilter{Kind: NoteKind, Limit: 1000}
	for {
		page, err := ws.Notes().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Notes {
			w, err := decode(n)
			if err != nil {
				return nil, err
			}
			if queued(w.Status) && w.SubmitVersion > 0 {
				if w.QueueSeq, err = submitSeq(ctx, ws, w.Task, w.SubmitVersion); err != nil {
					return nil, err
				}
			}
			out = append(out, w)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	slices.SortStableFunc(out, func(a, b Worktree) int {
		if qa, qb := queued(a.Status), queued(b.Status); qa != qb {
			if qa {
				return -1
			}
			return 1
		}
		switch {
		case a.QueueSeq > 0 && b.QueueSeq > 0:
			return cmp.Compare(a.QueueSeq, b.QueueSeq)
		case a.QueueSeq > 0:
			return 1
		case b.QueueSeq > 0:
			return -1
		}
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Task, b.Task)
	})
	return out, nil
}

// queued: the merge queue holds the entry.
func queued(st Status) bool {
	return st == StatusSubmitted || st == StatusMerging || st == StatusMerged
}

// submitSeq returns the seq of the note.put event that wrote version of
// task's record (the latest such, should the note have been deleted and
// made again), or 0 if the log no longer has it.
func submitSeq(ctx context.Context, ws *workspace.Workspace, task string, version int64) (int64, error) {
	q := workspace.EventQuery{Types: []string{workspace.EventNotePut}, SubjectKind: string(workspace.SubjectNote),
		SubjectID: NoteKind + "/" + task, Limit: 1000}
	var seq int64
	for {
		page, err := ws.Events().Read(ctx, q)
		var ce *workspace.CompactedError
		if errors.As(err, &ce) && ce.Floor-1 > q.AfterSeq {
			q.AfterSeq = ce.Floor - 1
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("worktree of task %s: its submission's place in the log: %w", task, err)
		}
		for _, e := range page.Events {
			if e.Version == version {
				seq = e.Seq
			}
		}
		if page.Next <= q.AfterSeq || page.Next >= page.Head {
			return seq, nil
		}
		q.AfterSeq = page.Next
	}
}

// isNotFound reports whether err means the record is missing.
func isNotFound(err error) bool { return errors.Is(err, workspace.ErrNotFound) }
