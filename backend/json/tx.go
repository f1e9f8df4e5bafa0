package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

type blobKey struct{ id, sha string }

// tx is a transaction on a store's state. Reads come from the state (which
// holds the transaction's own writes); writes change the state, mark what
// the commit record must carry, and push one undo step for both, so that
// rolling back to a savepoint also forgets the marks (see savepoint.go).
type tx struct {
	s     *store
	st    *state
	now   time.Time
	write bool

	undo []func()
	sps  []int              // open savepoints: len(undo) when each was taken
	arts map[string]*artRec // changed artifacts: their record before the transaction (nil if new)
	// rewrites are artifacts with an existing version replaced (not only appended).
	rewrites map[string]bool
	// unblobs are content files no version uses any more (retention).
	unblobs map[blobKey]bool
	blobs   map[blobKey][]byte
	tasks   map[string]bool
	notes   map[noteKey]bool
	leases  map[string]bool
	idem    map[string]idemJSON
	prune   time.Time
	events  []workspace.Event
	hashes  [][]byte // events' chain hashes
	floor   int64
	// base is set when SetChainBase ran: floor.json is rewritten.
	base bool
}

func newTx(s *store, write bool) *tx {
	t := &tx{s: s, st: s.st, now: time.Now().UTC().Truncate(time.Microsecond), write: write}
	if write {
		t.arts, t.blobs, t.rewrites = map[string]*artRec{}, map[blobKey][]byte{}, map[string]bool{}
		t.unblobs = map[blobKey]bool{}
		t.tasks, t.notes, t.leases = map[string]bool{}, map[noteKey]bool{}, map[string]bool{}
		t.idem = map[string]idemJSON{}
	}
	return t
}

func (t *tx) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}

var errNotFound = workspace.ErrNotFound

func (t *tx) Now() time.Time { return t.now }

func (t *tx) Artifact(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	id := ref.ID
	if id == "" {
		var ok bool
		if id, ok = t.st.byName[ref.Name]; !ok {
			return workspace.Artifact{}, errNotFound
		}
	}
	r := t.st.arts[id]
	if r == nil || r.deleted {
		return workspace.Artifact{}, errNotFound
	}
	return copyArtifact(r.head()), nil
}

func (t *tx) ArtifactVersion(ctx context.Context, id string, version int64) (workspace.Artifact, error) {
	r := t.st.arts[id]
	if r == nil || version < 1 || version > int64(len(r.versions)) || removed(r.versions[version-1]) {
		return workspace.Artifact{}, errNotFound
	}
	return copyArtifact(r.versions[version-1]), nil
}

func (t *tx) ArtifactVersions(ctx context.Context, id string) ([]workspace.Artifact, error) {
	r := t.st.arts[id]
	if r == nil {
		return nil, errNotFound
	}
	out := make([]workspace.Artifact, 0, len(r.versions))
	for _, a := range r.versions {
		if !removed(a) {
			out = append(out, copyArtifact(a))
		}
	}
	return out, nil
}

func (t *tx) Content(ctx context.Context, id string, _ int64, sha string) ([]byte, error) {
	if b, ok := t.blobs[blobKey{id, sha}]; ok {
		return slices.Clone(b), nil
	}
	if !idRE().MatchString(id) || !shaRE().MatchString(sha) {
		return nil, errNotFound
	}
	broot, rel := t.s.sub(blobPath(id, sha))
	data, err := broot.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", blobPath(id, sha), errNotFound)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

func (t *tx) ListArtifacts(ctx context.Context, f workspace.ArtifactFilter) ([]workspace.Artifact, error) {
	names := t.st.names
	start := sort.SearchStrings(names, f.NamePrefix)
	if f.After >= f.NamePrefix {
		start = sort.Search(len(names), func(i int) bool { return names[i] > f.After })
	}
	var out []workspace.Artifact
	for _, name := range names[start:] {
		if !strings.HasPrefix(name, f.NamePrefix) {
			break
		}
		a := t.st.arts[t.st.byName[name]].head()
		if (f.Kind != "" && a.Kind != f.Kind) || (f.Owner != "" && a.Owner != f.Owner) ||
			(f.TaskID != "" && a.TaskID != f.TaskID) || !labelsMatch(a.Labels, f.Labels) {
			continue
		}
		out = append(out, copyArtifact(a))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

func (t *tx) Task(ctx context.Context, id string) (workspace.Task, error) {
	task, ok := t.st.tasks[id]
	if !ok {
		return workspace.Task{}, errNotFound
	}
	return copyTask(task), nil
}

func (t *tx) ListTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error) {
	ids := t.st.taskIDs
	start := sort.Search(len(ids), func(i int) bool { return ids[i] > f.After })
	var out []workspace.Task
	for _, id := range ids[start:] {
		task := t.st.tasks[id]
		if (f.Status != "" && task.Status != f.Status) || (f.Assignee != "" && task.Assignee != f.Assignee) ||
			(f.ParentID != "" && task.ParentID != f.ParentID) || !labelsMatch(task.Labels, f.Labels) {
			continue
		}
		out = append(out, copyTask(task))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

func (t *tx) ReadyTask(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	// Candidates come in claim order: the first ready one is the answer.
	for _, k := range t.st.ready {
		task := t.st.tasks[k.id]
		if (r.ParentID != "" && task.ParentID != r.ParentID) || !labelsMatch(task.Labels, r.Labels) {
			continue
		}
		ready := true
		for _, d := range task.DependsOn {
			if dep, ok := t.st.tasks[d]; !ok || dep.Status != workspace.TaskDone {
				ready = false
				break
			}
		}
		if ready {
			return copyTask(task), nil
		}
	}
	return workspace.Task{}, errNotFound
}

func (t *tx) ExpiredClaims(ctx context.Context, now time.Time, limit int) ([]workspace.Task, error) {
	var out []workspace.Task
	for _, id := range t.st.claimed {
		task := t.st.tasks[id]
		if !task.LeaseExpiresAt.IsZero() && !task.LeaseExpiresAt.After(now) {
			out = append(out, copyTask(task))
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

func (t *tx) Note(ctx context.Context, kind, key string) (workspace.Note, error) {
	n, ok := t.st.notes[noteKey{kind, key}]
	if !ok {
		return workspace.Note{}, errNotFound
	}
	return n, nil
}

func (t *tx) ListNotes(ctx context.Context, q driver.NoteQuery) ([]workspace.Note, error) {
	var out []workspace.Note
	for k, n := range t.st.notes {
		if q.Kind != "" && k.kind != q.Kind {
			continue
		}
		if q.AfterKind != "" && (k.kind < q.AfterKind || (k.kind == q.AfterKind && k.key <= q.AfterKey)) {
			continue
		}
		if q.Kind != "" && q.BeforeKey != "" && k.key >= q.BeforeKey {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b workspace.Note) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

func (t *tx) Lease(ctx context.Context, resource string) (workspace.Lease, error) {
	l, ok := t.st.leases[resource]
	if !ok {
		return workspace.Lease{}, errNotFound
	}
	return l, nil
}

func (t *tx) ListLeases(ctx context.Context, now time.Time) ([]workspace.Lease, error) {
	var out []workspace.Lease
	for _, l := range t.st.leases {
		if l.Owner != "" && l.ExpiresAt.After(now) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b workspace.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	return out, nil
}

// The store lists deleted artifacts and released leases for an export
// and gc (driver.ReadTx's ArtifactIDs and LeaseRows).
var _ driver.ReadTx = (*tx)(nil)

// ArtifactIDs implements driver.ReadTx.
func (t *tx) ArtifactIDs(ctx context.Context, after string, limit int) ([]string, error) {
	var out []string
	for id := range t.st.arts {
		if id > after {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// LeaseRows implements driver.ReadTx.
func (t *tx) LeaseRows(ctx context.Context, after string, limit int) ([]workspace.Lease, error) {
	var out []workspace.Lease
	for r, l := range t.st.leases {
		if r > after {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b workspace.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *tx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	var out []workspace.Event
	for _, e := range t.st.events[t.st.eventsAfter(q.AfterSeq):] {
		if !q.Matches(e) {
			continue
		}
		out = append(out, e)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

func (t *tx) Head(ctx context.Context) (int64, error)  { return t.st.head(), nil }
func (t *tx) Floor(ctx context.Context) (int64, error) { return t.st.floor, nil }

func (t *tx) Idempotent(ctx context.Context, key string, now time.Time) ([]byte, error) {
	j, ok := t.idem[key]
	if !ok {
		data, err := t.s.readRecord(idemPath(key))
		if err != nil {
			return nil, err
		}
		if data == nil {
			return nil, errNotFound
		}
		if err := decodeJSON(idemPath(key), 1, data, &j); err != nil {
			return nil, err
		}
		if j.Key != key {
			return nil, errNotFound // another key with the same hashed file name
		}
	}
	if !j.Expires.After(now) {
		return nil, errNotFound
	}
	return slices.Clone([]byte(j.Result)), nil
}

func (t *tx) Counts(ctx context.Context) (driver.Counts, error) {
	c := driver.Counts{Artifacts: len(t.st.byName), Notes: len(t.st.notes), Tasks: map[workspace.TaskStatus]int{}}
	for _, task := range t.st.tasks {
		c.Tasks[task.Status]++
	}
	return c, nil
}
