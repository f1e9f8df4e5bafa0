package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// versionCut is what gc removes of one artifact's versions.
type versionCut struct {
	id       string
	versions []int64
}

// gcVersionPlan returns, from one snapshot, the versions policy p
// removes: of each live artifact, those older than its newest
// p.KeepVersions, except pinned ones (a workspace.PinKind note: written
// by Workspace.Pin, or by a batch op with Pin, as a change set's promotion
// does) and those a task's result names (the version that was the head when the task was
// last updated). A deleted artifact (every one the store holds)
// is cut the same way, its last version standing for the head, so it can
// still be read by ID at the version it was deleted at. It adds their
// count, and the size of the content no kept version shares, to k.
func gcVersionPlan(ctx context.Context, tx driver.ReadTx, p workspace.GCPolicy, k *workspace.GCKind) ([]versionCut, error) {
	if p.KeepVersions <= 0 {
		return nil, nil
	}
	pinned := map[string]bool{}
	err := eachNote(ctx, tx, workspace.PinKind, func(n workspace.Note) error { pinned[n.Key] = true; return nil })
	if err != nil {
		return nil, err
	}
	// A result names artifacts by name: the version it means is the one
	// that was the head when the task was last updated.
	named := map[string][]time.Time{}
	f := workspace.TaskFilter{Limit: archivePage}
	for {
		ts, err := tx.ListTasks(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			for _, name := range t.Result.Artifacts {
				named[name] = append(named[name], t.UpdatedAt)
			}
		}
		if len(ts) < archivePage {
			break
		}
		f.After = ts[len(ts)-1].ID
	}
	var cuts []versionCut
	// plan cuts artifact id's versions vs (oldest first), whose newest is
	// head: the head is the deletion's last version for a deleted one.
	plan := func(id, name string, head int64, vs []workspace.Artifact) {
		keepFrom := head - p.KeepVersions + 1
		keep := map[int64]bool{}
		for _, at := range named[name] {
			if v := versionAt(vs, at); v > 0 {
				keep[v] = true
			}
		}
		cut := versionCut{id: id}
		kept := map[string]bool{}
		var gone []workspace.Artifact
		for _, v := range vs {
			if v.Version >= keepFrom || keep[v.Version] || pinned[reserve.PinKey(id, v.Version)] {
				kept[v.SHA256] = true
				continue
			}
			cut.versions = append(cut.versions, v.Version)
			gone = append(gone, v)
		}
		freed := map[string]bool{}
		for _, v := range gone {
			k.Count++
			if !kept[v.SHA256] && !freed[v.SHA256] {
				freed[v.SHA256] = true
				k.Bytes += v.Size
			}
		}
		if len(cut.versions) > 0 {
			cuts = append(cuts, cut)
		}
	}
	live := map[string]bool{}
	af := workspace.ArtifactFilter{Limit: archivePage}
	for {
		heads, err := tx.ListArtifacts(ctx, af)
		if err != nil {
			return nil, err
		}
		for _, h := range heads {
			live[h.ID] = true
			if h.Version-p.KeepVersions+1 <= 1 {
				continue
			}
			vs, err := tx.ArtifactVersions(ctx, h.ID)
			if err != nil {
				return nil, err
			}
			plan(h.ID, h.Name, h.Version, vs)
		}
		if len(heads) < archivePage {
			break
		}
		af.After = heads[len(heads)-1].Name
	}
	// Deleted artifacts, as an export finds them.
	floor, err := tx.Floor(ctx)
	if err != nil {
		return nil, err
	}
	all, _, err := inventory(ctx, tx, floor)
	if err != nil {
		return nil, err
	}
	deleted := map[string]bool{}
	for id := range all {
		if !live[id] {
			deleted[id] = true
		}
	}
	ids := slices.Sorted(maps.Keys(deleted))
	for _, id := range ids {
		vs, err := tx.ArtifactVersions(ctx, id)
		if err != nil && !errors.Is(err, workspace.ErrNotFound) {
			return nil, err
		}
		if len(vs) > 0 {
			last := vs[len(vs)-1]
			plan(id, last.Name, last.Version, vs)
		}
	}
	return cuts, nil
}

// pinWritten pins version a.Version of artifact a, which the op being
// applied wrote: the note Workspace.Pin would put, in the op's own batch
// (an op's Pin). authorize checked the pin beforehand (pinNeeds); the
// reserved-kind check does not apply, as an op's Pin owns the pin kind.
func (x *exec) pinWritten(ctx context.Context, a *workspace.Artifact) error {
	_, err := x.putNote(ctx, workspace.PutNoteOp{Note: workspace.NotePut{
		Kind: workspace.PinKind, Key: reserve.PinKey(a.ID, a.Version),
		Title: fmt.Sprintf("%s version %d", a.Name, a.Version), Body: a.SHA256,
	}})
	return err
}

// pinsOf returns the keys of artifact id's pin notes: one read of the
// keys "ID@..." (every store orders keys bytewise), not one per version.
func pinsOf(ctx context.Context, tx driver.ReadTx, id string) (map[string]bool, error) {
	pins := map[string]bool{}
	prefix := id + "@"
	q := driver.NoteQuery{Kind: workspace.PinKind, AfterKind: workspace.PinKind, AfterKey: prefix, Limit: archivePage}
	for {
		ns, err := tx.ListNotes(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			if !strings.HasPrefix(n.Key, prefix) {
				return pins, nil
			}
			pins[n.Key] = true
		}
		if len(ns) < archivePage {
			return pins, nil
		}
		q.AfterKey = ns[len(ns)-1].Key
	}
}

// eachNote calls fn with every note of kind, in pages, and stops at the
// first error fn returns.
func eachNote(ctx context.Context, tx driver.ReadTx, kind string, fn func(workspace.Note) error) error {
	q := driver.NoteQuery{Kind: kind, Limit: archivePage}
	for {
		ns, err := tx.ListNotes(ctx, q)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if err := fn(n); err != nil {
				return err
			}
		}
		if len(ns) < archivePage {
			return nil
		}
		q.AfterKind, q.AfterKey = ns[len(ns)-1].Kind, ns[len(ns)-1].Key
	}
}

// versionAt returns the version of vs (oldest first) that was the head at
// t: the newest written at or before it (0 if none was).
func versionAt(vs []workspace.Artifact, t time.Time) int64 {
	var v int64
	for _, a := range vs {
		if a.UpdatedAt.After(t) {
			break
		}
		v = a.Version
	}
	return v
}

// gcVersions removes the planned versions (counted in r.Versions) in
// short transactions paced as the events' are; a version pinned since the
// plan stays, and is taken off the count.
func (h *handle) gcVersions(ctx context.Context, p workspace.GCPolicy, cuts []versionCut, r *workspace.GCReport) error {
	pace := gcPacer{size: min(minGCBatch, p.Batch), max: p.Batch, target: p.BatchTime}
	for len(cuts) > 0 {
		// One transaction takes up to pace.size versions, of one or more
		// artifacts.
		var batch []versionCut
		var n int64
		for len(cuts) > 0 && n < pace.size {
			c := cuts[0]
			take := min(int64(len(c.versions)), pace.size-n)
			batch = append(batch, versionCut{id: c.id, versions: c.versions[:take]})
			n += take
			if take == int64(len(c.versions)) {
				cuts = cuts[1:]
			} else {
				cuts[0].versions = c.versions[take:]
			}
		}
		var (
			locked time.Time
			pinned int64
		)
		err := h.st.Update(ctx, func(tx driver.Tx) error {
			locked, pinned = time.Now(), 0
			for _, c := range batch {
				pins, err := pinsOf(ctx, tx, c.id)
				if err != nil {
					return err
				}
				vs := slices.DeleteFunc(slices.Clone(c.versions), func(v int64) bool { return pins[reserve.PinKey(c.id, v)] })
				pinned += int64(len(c.versions) - len(vs))
				if err := tx.DeleteVersions(ctx, c.id, vs); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		took := time.Since(locked)
		r.Versions.Count -= pinned
		r.Batches++
		r.LongestBatch = max(r.LongestBatch, took)
		pace.learn(n, took)
		if len(cuts) > 0 {
			if err := rest(ctx, took); err != nil {
				return err
			}
		}
	}
	return nil
}

// versionGone turns err, a read of version v of artifact id (name) that
// found nothing, into a *workspace.VersionRemovedError naming the oldest
// version kept, when v is older than versions still there; otherwise it
// returns err.
func versionGone(ctx context.Context, tx driver.ReadTx, id, name string, v int64, err error) error {
	if !errors.Is(err, workspace.ErrNotFound) || id == "" {
		return err
	}
	vs, verr := tx.ArtifactVersions(ctx, id)
	if verr != nil || len(vs) == 0 || v >= vs[len(vs)-1].Version || v < 1 {
		return err
	}
	if name == "" {
		name = vs[len(vs)-1].Name
	}
	return &workspace.VersionRemovedError{Name: name, Version: v, Oldest: vs[0].Version}
}
