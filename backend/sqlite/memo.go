package sqlite

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/agentspace/agentspace/internal/quiet"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// A store's memo of the artifacts its last write transactions read and
// wrote, with their leases. A group's ops read their artifacts first (the
// hinted reads); at c=16 those reads were ~13% of the one committer's time
// per op. When every commit since the memo was last brought up to date was
// the store's own, the memo holds what the database does, and the hinted
// artifacts it knows need no read.
//
// Whether anyone else committed is told by the event log's head: every
// commit that changes an artifact or a lease appends an event (a
// guarantee of the engine, which the conformance suite checks), and only
// the transaction holding SQLite's write lock can append. So a transaction
// that finds the head where the store's last commit left it sees what the
// memo saw; one that finds it moved forgets the memo. The memo learns only
// from a transaction that committed, and forgets everything after a
// savepoint was rolled back (the writes undone may be among those it
// noted).

// memoLimit bounds the artifacts a memo keeps: past it, it starts over.
const memoLimit = 1024

// memoEntry is an artifact's head and its lease (workspace.ArtifactResource), nil
// when there is none.
type memoEntry struct {
	a     workspace.Artifact
	lease *workspace.Lease
}

// memo is what the store's own commits left, as of the head head.
type memo struct {
	mu    sync.Mutex
	valid bool
	head  int64
	byID  map[string]memoEntry
	names map[string]string // live name -> ID
	// left is the head the store's last commit left (leftSet: known).
	left    int64
	leftSet bool
	// rule counts the store's commits in a row that found the head where
	// its previous one left it: the memo answers only after enough of
	// them, so a store whose writes race another's soon stops spending a
	// statement on a head check that fails.
	rule quiet.Rule
}

func (m *memo) forgetLocked() {
	m.valid, m.byID, m.names = false, nil, nil
}

// known returns the hinted artifacts the memo holds, as reads ahead, and
// the head they are valid at.
func (m *memo) known(hints []driver.ReadHint) (head int64, ahead []readAheadHead) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.valid || !m.rule.Ready() {
		return 0, nil
	}
	for _, h := range hints {
		r := h.Artifact
		id := r.ID
		if id == "" {
			id = m.names[r.Name]
		}
		e, in := m.byID[id]
		if id == "" || !in || r.Name != "" && e.a.Name != r.Name {
			continue
		}
		lr := &leaseRead{resource: workspace.ArtifactResource(e.a.Name)}
		if e.lease != nil {
			lr.lease, lr.found = *e.lease, true
		}
		a := e.a
		a.Labels = maps.Clone(a.Labels)
		ahead = append(ahead, readAheadHead{ref: r, found: true, a: a, lease: lr})
	}
	return m.head, ahead
}

// noted is what a write transaction tells the memo: the artifacts it read
// or wrote, as they are at its commit, and what it changed that the memo
// may hold otherwise.
type noted struct {
	entries map[string]memoEntry // by ID
	// dropped are IDs, names and lease resources this transaction changed
	// without an entry to show for them.
	droppedIDs, droppedNames, droppedLeases []string
	// unsure is set when a savepoint was rolled back.
	unsure bool
	// start is the head the transaction found (checked against the memo,
	// or read to append events), end the head it left; set is false when
	// it learned neither.
	start, end int64
	set        bool
}

func (n *noted) entry(a workspace.Artifact, lease *workspace.Lease) {
	if n.entries == nil {
		n.entries = map[string]memoEntry{}
	}
	a.Labels = maps.Clone(a.Labels)
	if lease != nil {
		l := *lease
		lease = &l
	}
	n.entries[a.ID] = memoEntry{a: a, lease: lease}
}

// put notes a write of artifact a: its entry keeps its lease when the
// transaction knew it under the same name.
func (n *noted) put(a workspace.Artifact) {
	a = asStored(a)
	prev, ok := n.entries[a.ID]
	if ok && prev.a.Name == a.Name {
		n.entry(a, prev.lease)
		return
	}
	delete(n.entries, a.ID)
	n.droppedIDs = append(n.droppedIDs, a.ID)
	n.droppedNames = append(n.droppedNames, a.Name)
}

func (n *noted) deleted(id string) {
	delete(n.entries, id)
	n.droppedIDs = append(n.droppedIDs, id)
}

func (n *noted) leased(l workspace.Lease) {
	l.AcquiredAt, l.ExpiresAt = stored(l.AcquiredAt), stored(l.ExpiresAt)
	for _, e := range n.entries {
		if workspace.ArtifactResource(e.a.Name) == l.Resource {
			n.entry(e.a, &l)
			return
		}
	}
	n.droppedLeases = append(n.droppedLeases, l.Resource)
}

// asStored is a as a read of its head returns it: no content, labels nil
// when empty, times in UTC microseconds.
func asStored(a workspace.Artifact) workspace.Artifact {
	a.Content = nil
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	a.CreatedAt, a.UpdatedAt = fromMicros(micros(a.CreatedAt)), fromMicros(micros(a.UpdatedAt))
	return a
}

// stored is t as a read returns it: the zero time, or UTC microseconds.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return fromMicros(micros(t))
}

// learn brings the memo up to date with a committed transaction's notes.
func (m *memo) learn(n *noted) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rule.Commit(m.leftSet && n.set && n.start == m.left)
	m.left, m.leftSet = n.end, n.set
	if n.unsure || !n.set {
		m.forgetLocked()
		return
	}
	if !m.valid || n.start != m.head || len(m.byID)+len(n.entries) > memoLimit {
		// Someone else committed since the memo's head (or it is new):
		// only what this transaction saw is known.
		m.forgetLocked()
	}
	if m.byID == nil {
		m.byID, m.names = map[string]memoEntry{}, map[string]string{}
	}
	for _, id := range n.droppedIDs {
		m.dropLocked(id)
	}
	for _, name := range n.droppedNames {
		m.dropLocked(m.names[name])
	}
	for _, res := range n.droppedLeases {
		for id, e := range m.byID {
			if workspace.ArtifactResource(e.a.Name) == res {
				m.dropLocked(id)
			}
		}
	}
	for id, e := range n.entries {
		m.dropLocked(id)
		if other, ok := m.names[e.a.Name]; ok {
			m.dropLocked(other)
		}
		m.byID[id] = e
		m.names[e.a.Name] = id
	}
	m.valid, m.head = true, n.end
}

func (m *memo) dropLocked(id string) {
	if e, ok := m.byID[id]; ok {
		delete(m.byID, id)
		if m.names[e.a.Name] == id {
			delete(m.names, e.a.Name)
		}
	}
}

// checked notes the outcome of a head check: held or not.
func (m *memo) checked(held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held {
		m.rule.Held()
		return
	}
	m.rule.Failed()
	m.forgetLocked()
}

// fromMemo checks the head against the memo and, when it is where the
// store's last commit left it, takes the hinted artifacts the memo knows
// as read ahead (memoed counts them).
func (t *writeTx) fromMemo(ctx context.Context, m *memo, hints []driver.ReadHint) error {
	head, ahead := m.known(hints)
	if len(ahead) == 0 {
		return nil
	}
	var now int64
	if err := t.q.QueryRowContext(ctx, qHead).Scan(&now); err != nil {
		return fmt.Errorf("sqlite: event head: %w", err)
	}
	t.noted.start, t.noted.end, t.noted.set = now, now, true
	m.checked(now == head)
	if now == head {
		t.readAhead = append(t.readAhead, ahead...)
		t.memoed = len(ahead)
	}
	return nil
}
