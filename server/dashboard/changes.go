package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Shadows and change sets are package shadow's, which sits on the
// dashboard's floor (docs/architecture.md) and so may not be imported
// here. Each is a note of its own kind whose JSON body is the record, and
// each step of its life is a put of that note (an event): the dashboard
// reads those notes through the public API and decodes the part of the
// body it shows into the local types below. Fields it does not know are
// ignored, so the shadow package may add some.
const (
	shadowKind    = "shadow"
	changeSetKind = "changeset"
	maxChanges    = 1000 // records of each kind one page reads
)

// shadowRecord is what the dashboard reads of a shadow note's body
// (shadow.Shadow).
type shadowRecord struct {
	ID        string      `json:"id"`
	Dir       string      `json:"dir"`
	Task      string      `json:"task_id"`
	Actor     string      `json:"actor"`
	State     string      `json:"state"`
	CreatedAt time.Time   `json:"created_at"`
	Validated *validation `json:"validation"`
	Promoted  int         `json:"promotions"`
	Skipped   []struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// changeSetRecord is what the dashboard reads of a change set note's body
// (shadow.ChangeSet).
type changeSetRecord struct {
	Name      string            `json:"name"`
	Actor     string            `json:"actor"`
	Task      string            `json:"task_id"`
	State     string            `json:"state"`
	Staged    []staged          `json:"staged"`
	Validated *validation       `json:"validation"`
	CreatedAt time.Time         `json:"created_at"`
	Promoted  []promotedVersion `json:"promoted"`
}

// promotedVersion is what the dashboard reads of one version a change
// set's promotion wrote (shadow.PromotedVersion).
type promotedVersion struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int64  `json:"version"`
	SHA256  string `json:"sha256"`
}

type staged struct {
	Op          string `json:"op"`
	Name        string `json:"name"`
	NewName     string `json:"new_name"`
	Content     []byte `json:"content"`
	SHA256      string `json:"sha256"` // a promoted change: its content is the version it wrote
	BaseID      string `json:"base_id"`
	BaseVersion int64  `json:"base_version"`
}

type validation struct {
	DiffHash   string `json:"diff_hash"`
	Passed     bool   `json:"passed"`
	Violations []struct {
		Rule   string `json:"rule"`
		Path   string `json:"path"`
		Detail string `json:"detail"`
	} `json:"violations"`
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}

// validationRules are the rules a validation checks (shadow.Rule*), in
// the order the page lists each one's verdict.
var validationRules = []string{"area", "role", "lease", "command", "unsafe"}

// Verdicts is each rule's verdict: "passed" or the count of its
// violations.
func (v *validation) Verdicts() []ruleVerdict {
	out := make([]ruleVerdict, 0, len(validationRules))
	for _, r := range validationRules {
		rv := ruleVerdict{Rule: r}
		for _, x := range v.Violations {
			if x.Rule == r {
				rv.Broken++
			}
		}
		out = append(out, rv)
	}
	for _, x := range v.Violations {
		known := false
		for _, r := range validationRules {
			known = known || x.Rule == r
		}
		if !known {
			out = append(out, ruleVerdict{Rule: x.Rule, Broken: 1})
		}
	}
	return out
}

type ruleVerdict struct {
	Rule   string
	Broken int
}

// changeRow is one shadow or change set in the list.
type changeRow[T any] struct {
	Note   workspace.Note
	R      T
	Broken bool // the body did not decode
}

type changesView struct {
	Shadows    []changeRow[shadowRecord]
	ChangeSets []changeRow[changeSetRecord]
	All        bool // closed ones too
	More       bool // a kind had more than maxChanges records
}

func (h *Handler) readKind(ctx context.Context, kind string) ([]workspace.Note, bool, error) {
	var out []workspace.Note
	f := workspace.NoteFilter{Kind: kind, Limit: 1000}
	for {
		p, err := h.ws.Notes().List(ctx, f)
		if err != nil {
			return nil, false, err
		}
		out = append(out, p.Notes...)
		if p.Next == "" {
			return out, false, nil
		}
		if len(out) >= maxChanges {
			return out, true, nil
		}
		f.After = p.Next
	}
}

func (h *Handler) loadChanges(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	v := changesView{All: r.URL.Query().Get("all") != ""}
	shadows, more1, err := h.readKind(ctx, shadowKind)
	if err != nil {
		return nil, err
	}
	sets, more2, err := h.readKind(ctx, changeSetKind)
	if err != nil {
		return nil, err
	}
	v.More = more1 || more2
	for _, n := range shadows {
		row := changeRow[shadowRecord]{Note: n}
		row.Broken = json.Unmarshal([]byte(n.Body), &row.R) != nil
		if v.All || row.R.State == "open" || row.Broken {
			v.Shadows = append(v.Shadows, row)
		}
	}
	for _, n := range sets {
		row := changeRow[changeSetRecord]{Note: n}
		row.Broken = json.Unmarshal([]byte(n.Body), &row.R) != nil
		row.R.Staged = nil // the list does not show content
		if v.All || row.R.State == "open" || row.Broken {
			v.ChangeSets = append(v.ChangeSets, row)
		}
	}
	newest := func(a, b workspace.Note) bool { return a.UpdatedAt.After(b.UpdatedAt) }
	sort.SliceStable(v.Shadows, func(i, j int) bool { return newest(v.Shadows[i].Note, v.Shadows[j].Note) })
	sort.SliceStable(v.ChangeSets, func(i, j int) bool { return newest(v.ChangeSets[i].Note, v.ChangeSets[j].Note) })
	return v, nil
}

// stagedDiff is one staged change against its base version.
type stagedDiff struct {
	Op, Name, NewName string
	BaseVersion       int64
	Lines             []diffLine
	Added, Removed    int
	Binary            bool
	Identical         bool
	BaseGone          bool // the base version is no longer readable
}

type changeSetView struct {
	Note    workspace.Note
	R       changeSetRecord
	Changes []stagedDiff
	History string // the feed of the set's note
}

// loadChangeSet shows one change set: each staged change as a diff
// against the artifact version it was staged on.
func (h *Handler) loadChangeSet(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	name := r.URL.Query().Get("name")
	if name == "" {
		return nil, invalid("name: which change set?")
	}
	n, err := h.ws.Notes().Get(ctx, changeSetKind, name)
	if err != nil {
		return nil, err
	}
	v := changeSetView{Note: n, History: "/ui/feed?" + encode("kind", workspace.SubjectNote, "subject", name)}
	if err := json.Unmarshal([]byte(n.Body), &v.R); err != nil {
		return nil, invalid("change set %q: its note's body is not a change set", truncate(name, 80))
	}
	for _, s := range v.R.Staged {
		d := stagedDiff{Op: s.Op, Name: s.Name, NewName: s.NewName, BaseVersion: s.BaseVersion}
		var base []byte
		if s.BaseID != "" {
			a, err := h.ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: s.BaseID, Version: s.BaseVersion})
			switch {
			case err == nil:
				base = a.Content
			case errIsGone(err):
				d.BaseGone = true
			default:
				return nil, err
			}
		}
		next := s.Content
		if s.SHA256 != "" {
			next = h.promotedContent(ctx, v.R, s)
		}
		if s.Op == "delete" {
			next = nil
		}
		switch {
		case !isText(base) || !isText(next):
			d.Binary = true
		case string(base) == string(next):
			d.Identical = true
		default:
			d.Lines, d.Added, d.Removed = lineDiff(base, next)
		}
		v.Changes = append(v.Changes, d)
	}
	v.R.Staged = nil
	return v, nil
}

// promotedContent reads, as any artifact read (the reader's policy
// applies), the version a promoted change wrote: a promoted set's record
// keeps only its hash. A version gone or unreadable reads as nil.
func (h *Handler) promotedContent(ctx context.Context, cs changeSetRecord, s staged) []byte {
	target := s.Name
	if s.Op == "rename" {
		target = s.NewName
	}
	for i := len(cs.Promoted) - 1; i >= 0; i-- {
		pv := cs.Promoted[i]
		if pv.Name != target || pv.SHA256 != s.SHA256 {
			continue
		}
		ref := workspace.ArtifactRef{ID: pv.ID, Version: pv.Version}
		if pv.ID == "" {
			ref.Name = pv.Name
		}
		if a, err := h.ws.Artifacts().Get(ctx, ref); err == nil && a.SHA256 == pv.SHA256 {
			return a.Content
		}
		return nil
	}
	return nil
}

func errIsGone(err error) bool {
	return errors.Is(err, workspace.ErrNotFound) || errors.Is(err, workspace.ErrForbidden) || errorsIsCompacted(err)
}
