package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"

	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// Shadows and change sets are package shadow's: each is a note of its
// own kind whose JSON body is the record (shadow.Shadow, shadow.ChangeSet),
// and each step of its life is a put of that note (an event). The
// dashboard reads those notes through the public API and decodes them into
// shadow's own types.
const maxChanges = 1000 // records of each kind one page reads

// verdicts is each rule's verdict on a validation, in shadow's order of
// its rules, then any rule it does not know: "passed" or the count of its
// violations.
func verdicts(v *shadow.Validation) []ruleVerdict {
	if v == nil {
		return nil
	}
	rules := shadow.Rules()
	out := make([]ruleVerdict, 0, len(rules))
	for _, r := range rules {
		rv := ruleVerdict{Rule: r}
		for _, x := range v.Violations {
			if x.Rule == r {
				rv.Broken++
			}
		}
		out = append(out, rv)
	}
	for _, x := range v.Violations {
		if !slices.Contains(rules, x.Rule) {
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
	Shadows    []changeRow[shadow.Shadow]
	ChangeSets []changeRow[shadow.ChangeSet]
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
	shadows, more1, err := h.readKind(ctx, shadow.NoteKind)
	if err != nil {
		return nil, err
	}
	sets, more2, err := h.readKind(ctx, shadow.ChangeSetKind)
	if err != nil {
		return nil, err
	}
	v.More = more1 || more2
	for _, n := range shadows {
		row := changeRow[shadow.Shadow]{Note: n}
		row.Broken = json.Unmarshal([]byte(n.Body), &row.R) != nil
		if v.All || row.R.State == shadow.StateOpen || row.Broken {
			v.Shadows = append(v.Shadows, row)
		}
	}
	for _, n := range sets {
		row := changeRow[shadow.ChangeSet]{Note: n}
		row.Broken = json.Unmarshal([]byte(n.Body), &row.R) != nil
		row.R.Staged = nil // the list does not show content
		if v.All || row.R.State == shadow.StateOpen || row.Broken {
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
	R       shadow.ChangeSet
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
	n, err := h.ws.Notes().Get(ctx, shadow.ChangeSetKind, name)
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
		if s.Op == shadow.OpDelete {
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
func (h *Handler) promotedContent(ctx context.Context, cs shadow.ChangeSet, s shadow.Staged) []byte {
	target := s.Name
	if s.Op == shadow.OpRename {
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
