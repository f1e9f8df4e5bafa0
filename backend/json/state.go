package jsonstore

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// noteKey identifies a note.
type noteKey struct{ kind, key string }

// state is a handle's in-memory copy of the tree: every record and the
// event log, with the indexes reads need. It is loaded once, then kept
// current from the log's new events (see store.refresh). Writes in a
// transaction change it directly and keep an undo list, so reads inside
// Update see the transaction's own writes.
type state struct {
	arts   map[string]*artRec // by id, live and deleted
	byName map[string]string  // live name -> id
	names  []string           // live names, sorted
	folded map[string]string  // case-folded live name -> id

	tasks   map[string]workspace.Task
	taskIDs []string // sorted (UUIDv7: creation order)
	// ready holds the pending tasks in claim order (highest priority,
	// then oldest id) and claimed the in-progress ones by id, so a claim
	// walks candidates instead of every task.
	ready   []readyKey
	claimed []string

	notes  map[noteKey]workspace.Note
	leases map[string]workspace.Lease

	events []workspace.Event // ascending seq, all >= floor
	hashes [][]byte          // each event's chain hash (nil before the chain)
	floor  int64
	// floorHash is the hash the event at the floor chains from (nil: zeros).
	floorHash []byte
}

func newState() *state {
	return &state{
		arts: map[string]*artRec{}, byName: map[string]string{}, folded: map[string]string{},
		tasks: map[string]workspace.Task{}, notes: map[noteKey]workspace.Note{},
		leases: map[string]workspace.Lease{}, floor: 1,
	}
}

func fold(name string) string { return strings.ToLower(name) }

func (s *state) head() int64 {
	if n := len(s.events); n > 0 {
		return s.events[n-1].Seq
	}
	return s.floor - 1
}

func (s *state) liveName(r *artRec) (string, bool) {
	if r == nil || r.deleted {
		return "", false
	}
	return r.name, true
}

// setArt makes r (nil: forget) the artifact id's record, keeping the name
// indexes right, and returns how to undo it.
func (s *state) setArt(id string, r *artRec) func() {
	old := s.arts[id]
	if oldName, ok := s.liveName(old); ok && s.byName[oldName] == id {
		delete(s.byName, oldName)
		delete(s.folded, fold(oldName))
		if i, found := slices.BinarySearch(s.names, oldName); found {
			s.names = slices.Delete(s.names, i, i+1)
		}
	}
	if r == nil {
		delete(s.arts, id)
	} else {
		s.arts[id] = r
	}
	if name, ok := s.liveName(r); ok {
		s.byName[name] = id
		s.folded[fold(name)] = id
		if i, found := slices.BinarySearch(s.names, name); !found {
			s.names = slices.Insert(s.names, i, name)
		}
	}
	return func() { s.setArt(id, old) }
}

func (s *state) setTask(t workspace.Task) func() {
	old, had := s.tasks[t.ID]
	if had {
		s.indexTask(old, false)
	}
	s.tasks[t.ID] = t
	s.indexTask(t, true)
	if !had {
		if i, found := slices.BinarySearch(s.taskIDs, t.ID); !found {
			s.taskIDs = slices.Insert(s.taskIDs, i, t.ID)
		}
	}
	return func() {
		s.indexTask(t, false)
		if had {
			s.tasks[t.ID] = old
			s.indexTask(old, true)
			return
		}
		delete(s.tasks, t.ID)
		if i, found := slices.BinarySearch(s.taskIDs, t.ID); found {
			s.taskIDs = slices.Delete(s.taskIDs, i, i+1)
		}
	}
}

// removeTask forgets task id (retention).
func (s *state) removeTask(id string) func() {
	old, had := s.tasks[id]
	if !had {
		return func() {}
	}
	s.indexTask(old, false)
	delete(s.tasks, id)
	i, found := slices.BinarySearch(s.taskIDs, id)
	if found {
		s.taskIDs = slices.Delete(s.taskIDs, i, i+1)
	}
	return func() {
		s.tasks[id] = old
		s.indexTask(old, true)
		if i, found := slices.BinarySearch(s.taskIDs, id); !found {
			s.taskIDs = slices.Insert(s.taskIDs, i, id)
		}
	}
}

// readyKey orders pending tasks as a claim takes them.
type readyKey struct {
	priority int
	id       string
}

func compareReady(a, b readyKey) int {
	if a.priority != b.priority {
		return cmp.Compare(b.priority, a.priority) // highest first
	}
	return strings.Compare(a.id, b.id)
}

// indexTask adds t to (or, with add false, removes it from) the index its
// status belongs to.
func (s *state) indexTask(t workspace.Task, add bool) {
	switch t.Status {
	case workspace.TaskPending:
		k := readyKey{t.Priority, t.ID}
		i, found := slices.BinarySearchFunc(s.ready, k, compareReady)
		switch {
		case add && !found:
			s.ready = slices.Insert(s.ready, i, k)
		case !add && found:
			s.ready = slices.Delete(s.ready, i, i+1)
		}
	case workspace.TaskInProgress:
		i, found := slices.BinarySearch(s.claimed, t.ID)
		switch {
		case add && !found:
			s.claimed = slices.Insert(s.claimed, i, t.ID)
		case !add && found:
			s.claimed = slices.Delete(s.claimed, i, i+1)
		}
	}
}

// indexTasks builds the task indexes from s.tasks, after a load.
func (s *state) indexTasks() {
	s.ready, s.claimed = s.ready[:0], s.claimed[:0]
	for _, t := range s.tasks {
		switch t.Status {
		case workspace.TaskPending:
			s.ready = append(s.ready, readyKey{t.Priority, t.ID})
		case workspace.TaskInProgress:
			s.claimed = append(s.claimed, t.ID)
		}
	}
	slices.SortFunc(s.ready, compareReady)
	slices.Sort(s.claimed)
}

// setNote stores n, or deletes the note k when n is nil.
func (s *state) setNote(k noteKey, n *workspace.Note) func() {
	old, had := s.notes[k]
	if n == nil {
		delete(s.notes, k)
	} else {
		s.notes[k] = *n
	}
	return func() {
		if had {
			s.notes[k] = old
		} else {
			delete(s.notes, k)
		}
	}
}

// setLease stores l, or forgets resource when l is nil.
func (s *state) setLease(resource string, l *workspace.Lease) func() {
	old, had := s.leases[resource]
	if l == nil {
		delete(s.leases, resource)
	} else {
		s.leases[resource] = *l
	}
	return func() {
		if had {
			s.leases[resource] = old
		} else {
			delete(s.leases, resource)
		}
	}
}

func (s *state) appendEvents(evs []workspace.Event, hashes [][]byte) func() {
	n := len(s.events)
	s.events = append(s.events, evs...)
	s.hashes = append(s.hashes, hashes...)
	return func() { s.events, s.hashes = s.events[:n:n], s.hashes[:n:n] }
}

// headHash is the hash the next event chains from: the newest event's, or
// the floor's base when there is none, or one written before the chain.
func (s *state) headHash() []byte {
	if n := len(s.hashes); n > 0 && s.hashes[n-1] != nil {
		return s.hashes[n-1]
	}
	if s.floorHash == nil {
		return driver.ZeroChainHash
	}
	return s.floorHash
}

func (s *state) compact(floor int64) func() {
	oldEvents, oldHashes, oldFloor, oldBase := s.events, s.hashes, s.floor, s.floorHash
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].Seq >= floor })
	if i > 0 && s.events[i-1].Seq == floor-1 && s.hashes[i-1] != nil {
		s.floorHash = s.hashes[i-1]
	}
	s.events = slices.Clone(s.events[i:])
	s.hashes = slices.Clone(s.hashes[i:])
	s.floor = floor
	return func() { s.events, s.hashes, s.floor, s.floorHash = oldEvents, oldHashes, oldFloor, oldBase }
}

// eventsAfter returns the index of the first event with Seq > seq.
func (s *state) eventsAfter(seq int64) int {
	return sort.Search(len(s.events), func(i int) bool { return s.events[i].Seq > seq })
}

// Copies handed out, so that a caller changing a returned map or slice
// never changes the store's state.

func copyArtifact(a workspace.Artifact) workspace.Artifact {
	a.Labels = maps.Clone(a.Labels)
	return a
}

func copyTask(t workspace.Task) workspace.Task {
	t.Labels = maps.Clone(t.Labels)
	t.DependsOn = slices.Clone(t.DependsOn)
	t.Areas = slices.Clone(t.Areas)
	t.Result.Artifacts = slices.Clone(t.Result.Artifacts)
	return t
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}
