package jsonstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// The write half of tx: each write changes the state, marks what the
// commit record must carry, and pushes the undo of both; record builds that
// record.

// setMark sets m[k] to v and pushes the step that restores m[k].
func setMark[K comparable, V any](t *tx, m map[K]V, k K, v V) {
	old, had := m[k]
	m[k] = v
	t.undo = append(t.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

// mark records that the commit record must carry k's file.
func mark[K comparable](t *tx, m map[K]bool, k K) {
	if !m[k] {
		setMark(t, m, k, true)
	}
}

// markArt remembers the artifact's record as it was before the
// transaction, the first time the transaction changes it.
func (t *tx) markArt(id string) {
	if _, seen := t.arts[id]; !seen {
		setMark(t, t.arts, id, t.st.arts[id])
	}
}

// setField sets *p to v and pushes the step that restores it.
func setField[V any](t *tx, p *V, v V) {
	old := *p
	*p = v
	t.undo = append(t.undo, func() { *p = old })
}

func (t *tx) PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error {
	if !idRE().MatchString(a.ID) {
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
	case a.Version > n+1:
		// An archive's versions skip those retention removed: their
		// places are kept, marked removed.
		for v := n + 1; v < a.Version; v++ {
			r.versions = append(r.versions, workspace.Artifact{ID: a.ID, Version: v})
		}
		r.versions = append(r.versions, a)
	case a.Version == n+1:
		r.versions = append(r.versions, a)
	case a.Version >= 1 && a.Version <= n:
		r.versions[a.Version-1] = a
		mark(t, t.rewrites, a.ID) // not an append: the versions file is written anew
	default:
		return fmt.Errorf("json store: artifact %s: version %d after %d", a.ID, a.Version, n)
	}
	r.name = a.Name
	if content != nil {
		setMark(t, t.blobs, blobKey{a.ID, a.SHA256}, content)
	}
	t.markArt(a.ID)
	t.undo = append(t.undo, t.st.setArt(a.ID, r))
	return nil
}

// DeleteVersions implements driver.Tx: each removed version leaves its
// line in the versions file, marked removed, and a content file no
// version of the artifact uses any more is deleted.
func (t *tx) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	old := t.st.arts[id]
	if old == nil {
		return nil
	}
	r := old.clone()
	var shas []string
	for _, v := range versions {
		if v < 1 || v >= int64(len(r.versions)) || removed(r.versions[v-1]) {
			continue // never the head
		}
		shas = append(shas, r.versions[v-1].SHA256)
		r.versions[v-1] = workspace.Artifact{ID: id, Version: v}
	}
	if len(shas) == 0 {
		return nil
	}
	used := map[string]bool{}
	for _, a := range r.versions {
		used[a.SHA256] = true
	}
	for _, sha := range shas {
		if !used[sha] {
			setMark(t, t.unblobs, blobKey{id, sha}, true)
		}
	}
	mark(t, t.rewrites, id)
	t.markArt(id)
	t.undo = append(t.undo, t.st.setArt(id, r))
	return nil
}

// checkNewName refuses names this backend cannot give a readable copy of
// its own: a segment that could be taken for our temporary files, and (on a
// case-insensitive file system) a live name equal but for case, which
// would share the copy's file. (A symbolic link on the copy's path is
// refused at commit, as on every path: links.go.)
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
	if !idRE().MatchString(task.ID) {
		return fmt.Errorf("json store: task id %q cannot be a file name", task.ID)
	}
	mark(t, t.tasks, task.ID)
	t.undo = append(t.undo, t.st.setTask(copyTask(task)))
	return nil
}

func (t *tx) DeleteTask(ctx context.Context, id string) (bool, error) {
	if _, ok := t.st.tasks[id]; !ok {
		return false, nil
	}
	for _, o := range t.st.tasks {
		if o.ParentID == id || slices.Contains(o.DependsOn, id) {
			return false, nil
		}
	}
	mark(t, t.tasks, id)
	t.undo = append(t.undo, t.st.removeTask(id))
	return true, nil
}

func (t *tx) PutNote(ctx context.Context, n workspace.Note) error {
	if !kindRE().MatchString(n.Kind) {
		return fmt.Errorf("json store: note kind %q cannot be a directory name", n.Kind)
	}
	k := noteKey{n.Kind, n.Key}
	mark(t, t.notes, k)
	t.undo = append(t.undo, t.st.setNote(k, &n))
	return nil
}

func (t *tx) DeleteNote(ctx context.Context, kind, key string) error {
	k := noteKey{kind, key}
	if _, ok := t.st.notes[k]; !ok {
		return errNotFound
	}
	mark(t, t.notes, k)
	t.undo = append(t.undo, t.st.setNote(k, nil))
	return nil
}

func (t *tx) PutLease(ctx context.Context, l workspace.Lease) error {
	mark(t, t.leases, l.Resource)
	t.undo = append(t.undo, t.st.setLease(l.Resource, &l))
	return nil
}

func (t *tx) PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error {
	setMark(t, t.idem, key, idemJSON{Key: key, Expires: expires, Result: slices.Clone(result)})
	return nil
}

func (t *tx) PruneIdempotent(ctx context.Context, now time.Time) error {
	setField(t, &t.prune, now)
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
	hashes := driver.ChainHashes(t.st.headHash(), evs)
	setField(t, &t.events, append(t.events, evs...))
	setField(t, &t.hashes, append(t.hashes, hashes...))
	t.undo = append(t.undo, t.st.appendEvents(evs, hashes))
	return evs[0].Seq, nil
}

func (t *tx) CompactEvents(ctx context.Context, floor int64) error {
	setField(t, &t.floor, floor)
	t.undo = append(t.undo, t.st.compact(floor))
	return nil
}

// record builds the commit record from what the transaction changed: nil
// if it changed nothing.
func (t *tx) record() (*record, error) {
	rec := &record{Floor: t.floor}
	if t.floor > 0 || t.base {
		rec.FloorHash = hex.EncodeToString(t.st.floorHash)
	}
	if t.base && t.floor == 0 {
		data, err := marshalFile(floorJSON{Floor: t.st.floor, Hash: rec.FloorHash})
		if err != nil {
			return nil, err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: floorFile, Data: data})
	}
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
		if err := t.recordVersions(rec, before, r); err != nil {
			return nil, err
		}
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
	for _, k := range sortedKeys(t.unblobs) {
		rec.Removes = append(rec.Removes, blobPath(k.id, k.sha))
	}
	for _, id := range sortedKeys(t.tasks) {
		task, ok := t.st.tasks[id]
		if !ok {
			rec.Removes = append(rec.Removes, taskPath(id))
			continue
		}
		data, err := encodeTask(task)
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
	for i, e := range t.events {
		rec.Events = append(rec.Events, toEventJSON(e, t.hashes[i]))
	}
	if len(rec.Writes) == 0 && len(rec.Appends) == 0 && len(rec.Removes) == 0 && len(rec.Events) == 0 && rec.Floor == 0 {
		return nil, nil
	}
	return rec, nil
}

// recordVersions adds the change of r's versions file to rec: the new
// versions' lines appended where the file ends now, or the whole file for a
// new artifact or one whose older versions were replaced (an import).
func (t *tx) recordVersions(rec *record, before, r *artRec) error {
	p := versionsPath(r.id)
	if before == nil || t.rewrites[r.id] {
		data, err := encodeVersions(r.versions)
		if err != nil {
			return err
		}
		rec.Writes = append(rec.Writes, fileWrite{Path: p, Data: data})
		return nil
	}
	if len(r.versions) == len(before.versions) {
		return nil // deleted or undeleted: the head file says so
	}
	data, err := encodeVersions(r.versions[len(before.versions):])
	if err != nil {
		return err
	}
	vroot, rel := t.s.sub(p)
	fi, err := vroot.Stat(rel)
	if err != nil {
		return fmt.Errorf("json store: artifact %s: %w", r.id, err)
	}
	rec.Appends = append(rec.Appends, fileAppend{Path: p, At: fi.Size(), Data: data})
	return nil
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
