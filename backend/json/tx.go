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
)

type blobKey struct{ id, sha string }

// tx is a transaction on a store's state. Reads come from the state (which
// holds the transaction's own writes); writes change the state, push an
// undo step, and mark what the commit record must carry.
type tx struct {
	s     *store
	st    *state
	now   time.Time
	write bool

	undo   []func()
	arts   map[string]*artRec // changed artifacts: their record before the transaction (nil if new)
	blobs  map[blobKey][]byte
	tasks  map[string]bool
	notes  map[noteKey]bool
	leases map[string]bool
	idem   map[string]idemJSON
	prune  time.Time
	events []workspace.Event
	floor  int64
}

func newTx(s *store, write bool) *tx {
	t := &tx{s: s, st: s.st, now: time.Now().UTC().Truncate(time.Microsecond), write: write}
	if write {
		t.arts, t.blobs = map[string]*artRec{}, map[blobKey][]byte{}
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
	if r == nil || version < 1 || version > int64(len(r.versions)) {
		return workspace.Artifact{}, errNotFound
	}
	return copyArtifact(r.versions[version-1]), nil
}

func (t *tx) ArtifactVersions(ctx context.Context, id string) ([]workspace.Artifact, error) {
	r := t.st.arts[id]
	if r == nil {
		return nil, errNotFound
	}
	out := make([]workspace.Artifact, len(r.versions))
	for i, a := range r.versions {
		out[i] = copyArtifact(a)
	}
	return out, nil
}

func (t *tx) Content(ctx context.Context, id, sha string) ([]byte, error) {
	if b, ok := t.blobs[blobKey{id, sha}]; ok {
		return slices.Clone(b), nil
	}
	if !idRE.MatchString(id) || !shaRE.MatchString(sha) {
		return nil, errNotFound
	}
	data, err := t.s.root.ReadFile(blobPath(id, sha))
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
	var best *workspace.Task
	for _, id := range t.st.taskIDs {
		task := t.st.tasks[id]
		if task.Status != workspace.TaskPending || (r.ParentID != "" && task.ParentID != r.ParentID) || !labelsMatch(task.Labels, r.Labels) {
			continue
		}
		ready := true
		for _, d := range task.DependsOn {
			if dep, ok := t.st.tasks[d]; !ok || dep.Status != workspace.TaskDone {
				ready = false
				break
			}
		}
		// ids ascend, so the first task of the highest priority is the oldest.
		if ready && (best == nil || task.Priority > best.Priority) {
			best = &task
		}
	}
	if best == nil {
		return workspace.Task{}, errNotFound
	}
	return copyTask(*best), nil
}

func (t *tx) ExpiredClaims(ctx context.Context, now time.Time, limit int) ([]workspace.Task, error) {
	var out []workspace.Task
	for _, id := range t.st.taskIDs {
		task := t.st.tasks[id]
		if task.Status == workspace.TaskInProgress && !task.LeaseExpiresAt.IsZero() && !task.LeaseExpiresAt.After(now) {
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

func (t *tx) ListNotes(ctx context.Context, q workspace.NoteQuery) ([]workspace.Note, error) {
	var out []workspace.Note
	for k, n := range t.st.notes {
		if q.Kind != "" && k.kind != q.Kind {
			continue
		}
		if q.AfterKind != "" && (k.kind < q.AfterKind || (k.kind == q.AfterKind && k.key <= q.AfterKey)) {
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

func (t *tx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	var out []workspace.Event
	for _, e := range t.st.events[t.st.eventsAfter(q.AfterSeq):] {
		if !eventMatches(e, q) {
			continue
		}
		out = append(out, e)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

func eventMatches(e workspace.Event, q workspace.EventQuery) bool {
	switch {
	case len(q.Types) > 0 && !slices.Contains(q.Types, e.Type),
		q.Actor != "" && e.Actor != q.Actor,
		q.SubjectKind != "" && e.Subject.Kind != q.SubjectKind,
		q.SubjectID != "" && e.Subject.ID != q.SubjectID,
		q.SubjectName != "" && e.Subject.Name != q.SubjectName,
		!q.Since.IsZero() && e.Time.Before(q.Since),
		!q.Until.IsZero() && !e.Time.Before(q.Until):
		return false
	}
	return true
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

func (t *tx) Counts(ctx context.Context) (workspace.Counts, error) {
	c := workspace.Counts{Artifacts: len(t.st.byName), Notes: len(t.st.notes), Tasks: map[workspace.TaskStatus]int{}}
	for _, task := range t.st.tasks {
		c.Tasks[task.Status]++
	}
	return c, nil
}

// Writes.

func (t *tx) markArt(id string) *artRec {
	old := t.st.arts[id]
	if _, seen := t.arts[id]; !seen {
		t.arts[id] = old
	}
	return old
}

func (t *tx) PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error {
	if !idRE.MatchString(a.ID) {
		return fmt.Errorf("json store: artifact id %q cannot be a file name", a.ID)
	}
	old := t.st.arts[a.ID]
	var r *artRec
	if old == nil || old.deleted {
		if err := t.checkNewName(a.Name, a.ID); err != nil {
			return err
		}
	}
	if old == nil {
		r = &artRec{id: a.ID, name: a.Name}
	} else {
		r = old.clone()
		r.deleted = false
	}
	a.Content = nil
	switch n := int64(len(r.versions)); {
	case a.Version == n+1:
		r.versions = append(r.versions, a)
	case a.Version >= 1 && a.Version <= n:
		r.versions[a.Version-1] = a
	default:
		return fmt.Errorf("json store: artifact %s: version %d after %d", a.ID, a.Version, n)
	}
	r.name = a.Name
	if content != nil {
		t.blobs[blobKey{a.ID, a.SHA256}] = content
	}
	t.markArt(a.ID)
	t.undo = append(t.undo, t.st.setArt(a.ID, r))
	return nil
}

// checkNewName refuses names this backend cannot give a readable copy of
// its own: a segment that could be taken for our temporary files, and (on a
// case-insensitive file system) a live name equal but for case, which
// would share the copy's file. A symbolic link on the copy's path is
// refused too.
func (t *tx) checkNewName(name, id string) error {
	for _, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, tmpPrefix) {
			return &workspace.InvalidError{Field: "name", Reason: fmt.Sprintf("%q: segments starting with %q are reserved by the json backend", name, tmpPrefix)}
		}
	}
	if t.s.foldCase {
		if other, ok := t.st.folded[fold(name)]; ok && other != id {
			return fmt.Errorf("artifact %q: the name of artifact %q differs only in case on this case-insensitive file system: %w",
				name, t.st.arts[other].name, workspace.ErrAlreadyExists)
		}
	}
	cur := ""
	for _, seg := range strings.Split(name, "/") {
		cur += seg
		fi, err := t.s.mirror.Lstat(cur)
		if err != nil {
			break
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("artifact %q: %s/%s %w", name, artsDir, cur, errSymlink)
		}
		cur += "/"
	}
	return nil
}

func (t *tx) DeleteArtifact(ctx context.Context, id string) error {
	old := t.st.arts[id]
	if old == nil {
		return errNotFound
	}
	r := old.clone()
	r.deleted = true
	t.markArt(id)
	t.undo = append(t.undo, t.st.setArt(id, r))
	return nil
}

func (t *tx) PutTask(ctx context.Context, task workspace.Task) error {
	if !idRE.MatchString(task.ID) {
		return fmt.Errorf("json store: task id %q cannot be a file name", task.ID)
	}
	t.tasks[task.ID] = true
	t.undo = append(t.undo, t.st.setTask(copyTask(task)))
	return nil
}

func (t *tx) PutNote(ctx context.Context, n workspace.Note) error {
	if !kindRE.MatchString(n.Kind) {
		return fmt.Errorf("json store: note kind %q cannot be a directory name", n.Kind)
	}
	k := noteKey{n.Kind, n.Key}
	t.notes[k] = true
	t.undo = append(t.undo, t.st.setNote(k, &n))
	return nil
}

func (t *tx) DeleteNote(ctx context.Context, kind, key string) error {
	k := noteKey{kind, key}
	if _, ok := t.st.notes[k]; !ok {
		return errNotFound
	}
	t.notes[k] = true
	t.undo = append(t.undo, t.st.setNote(k, nil))
	return nil
}

func (t *tx) PutLease(ctx context.Context, l workspace.Lease) error {
	t.leases[l.Resource] = true
	t.undo = append(t.undo, t.st.setLease(l.Resource, &l))
	return nil
}

func (t *tx) PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error {
	t.idem[key] = idemJSON{Key: key, Expires: expires, Result: slices.Clone(result)}
	return nil
}

func (t *tx) PruneIdempotent(ctx context.Context, now time.Time) error {
	t.prune = now
	return nil
}

func (t *tx) AppendEvents(ctx context.Context, evs []workspace.Event) (int64, error) {
	if len(evs) == 0 {
		return t.st.head() + 1, nil
	}
	evs = slices.Clone(evs)
	head := t.st.head()
	if evs[0].Seq == 0 {
		for i := range evs {
			evs[i].Seq = head + 1 + int64(i)
		}
	} else {
		prev := head
		for _, e := range evs {
			if e.Seq <= prev {
				return 0, fmt.Errorf("json store: explicit seq %d is not above %d", e.Seq, prev)
			}
			prev = e.Seq
		}
	}
	t.events = append(t.events, evs...)
	t.undo = append(t.undo, t.st.appendEvents(evs))
	return evs[0].Seq, nil
}

func (t *tx) CompactEvents(ctx context.Context, floor int64) error {
	t.floor = floor
	t.undo = append(t.undo, t.st.compact(floor))
	return nil
}

// record builds the commit record from what the transaction changed: nil
// if it changed nothing.
func (t *tx) record() (*record, error) {
	rec := &record{Floor: t.floor}
	var removes, writes []mirrorOp
	for _, id := range sortedKeys(t.arts) {
		before, r := t.arts[id], t.st.arts[id]
		if r == nil {
			continue
		}
		data, err := encodeArtifact(r)
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: artifactPath(id), Data: data})
		oldName, wasLive := t.st.liveName(before)
		newName, isLive := t.st.liveName(r)
		if wasLive && (!isLive || oldName != newName) {
			removes = append(removes, mirrorOp{Name: oldName})
		}
		if isLive && (!wasLive || oldName != newName || before.head().SHA256 != r.head().SHA256) {
			writes = append(writes, mirrorOp{Name: newName, Blob: blobPath(id, r.head().SHA256)})
		}
	}
	rec.Mirror = append(removes, writes...)
	for _, k := range sortedKeys(t.blobs) {
		rec.Writes = append(rec.Writes, fileWrite{Path: blobPath(k.id, k.sha), Data: t.blobs[k]})
	}
	// Blobs first: a record file never names content that is not there.
	slices.SortStableFunc(rec.Writes, func(a, b fileWrite) int {
		return boolInt(!strings.HasPrefix(a.Path, blobsDir+"/")) - boolInt(!strings.HasPrefix(b.Path, blobsDir+"/"))
	})
	for _, id := range sortedKeys(t.tasks) {
		data, err := encodeTask(t.st.tasks[id])
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: taskPath(id), Data: data})
	}
	for _, k := range sortedKeys(t.notes) {
		n, ok := t.st.notes[k]
		if !ok {
			rec.Removes = append(rec.Removes, notePath(k))
			continue
		}
		data, err := encodeNote(n)
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: notePath(k), Data: data})
	}
	for _, res := range sortedKeys(t.leases) {
		data, err := encodeLease(t.st.leases[res])
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: leasePath(res), Data: data})
	}
	if !t.prune.IsZero() {
		expired, err := t.expiredIdem(t.prune)
		if err != nil {
			return nil, err
		}
		rec.Removes = append(rec.Removes, expired...)
	}
	for _, k := range sortedKeys(t.idem) {
		data, err := marshalFile(t.idem[k])
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: idemPath(k), Data: data})
	}
	for _, e := range t.events {
		rec.Events = append(rec.Events, toEventJSON(e))
	}
	if len(rec.Writes) == 0 && len(rec.Removes) == 0 && len(rec.Events) == 0 && rec.Floor == 0 {
		return nil, nil
	}
	return rec, nil
}

// expiredIdem lists the idempotency files whose keys expired before now.
func (t *tx) expiredIdem(now time.Time) ([]string, error) {
	ents, err := t.s.readDir(idemDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := idemDir + "/" + e.Name()
		data, err := t.s.readRecord(name)
		if err != nil || data == nil {
			continue
		}
		var j idemJSON
		if decodeJSON(name, 1, data, &j) != nil {
			continue // a damaged key file is reported when its key is used
		}
		if _, rewritten := t.idem[j.Key]; !rewritten && !j.Expires.After(now) {
			out = append(out, name)
		}
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}
