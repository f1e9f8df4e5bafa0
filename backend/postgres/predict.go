package postgres

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/internal/quiet"
	"github.com/agentspace/agentspace/workspace"
)

// Predicted writes: one round trip instead of two.
//
// A write transaction normally spends two round trips: the first takes the
// writers' lock and reads what the transaction needs (the clock, the head,
// the hinted records and their leases), the second sends the writes and
// COMMIT. A store that was the last to write knows most of what the first
// would read: the records it just wrote or read, the head it moved. When
// every hinted read is known, the transaction runs on those values, and
// its writes go in one batch with BEGIN, the lock and a guard: a statement
// that fails, and with it the transaction, unless every value the
// transaction was run on is still what the database holds. The guard
// checks each record by its version (every write of an artifact makes a
// new one) and each lease by all its fields, the head, whether another
// store listens, and that the clock the transaction used is one the
// database's showed in the last 100 ms (and, predicted, it is never behind
// the last commit's, so Now never goes back).
// When the guard fails nothing was written, and the transaction runs again
// the usual way. A transaction whose run reads anything not known is not
// sent at all: it runs the usual way at once.

// memo is what a store knows of the state its last write transaction left.
type memo struct {
	mu sync.Mutex
	// valid is set once a transaction of this store committed alone (none
	// of its others overlapped it), so head, now and notify are its.
	valid  bool
	head   int64
	now    time.Time
	notify bool
	// offset is the database's clock minus ours, as the last usual start
	// saw it: the database's clock read before its answer reached us, so
	// ours plus offset is no later than the database's.
	offset time.Duration
	// artifacts are live artifacts by ID, with the IDs of their names.
	artifacts map[string]workspace.Artifact
	names     map[string]string
	// leases by resource; nil is a lease row known not to exist.
	leases map[string]*workspace.Lease
	// rule counts the store's transactions in a row that found the head
	// where its previous commit had left it (no other store wrote in
	// between): a prediction is tried only after enough of them, so a
	// store whose writes race another's soon stops sending batches the
	// guard would refuse.
	rule quiet.Rule
}

// memoLimit bounds the records a memo keeps: past it, it starts over.
const memoLimit = 1024

// errUnpredicted stops a predicted transaction that read something not
// known: it runs the usual way instead. The engine never sees it.
var errUnpredicted = errors.New("postgres: read not predicted")

// forget drops everything known; m.mu is held.
func (m *memo) forget() {
	m.valid = false
	m.artifacts, m.names, m.leases = nil, nil, nil
}

// drop is forget, for a caller that does not hold m.mu.
func (m *memo) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget()
}

// predict returns the reads ahead of hints as the memo knows them, the
// clock and head to run on, and whether it knows them all and the store
// has been writing alone long enough (see quiet).
func (m *memo) predict(hints []workspace.ReadHint, heard int64) (p prediction, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.valid || len(hints) == 0 || heard > m.head {
		return p, false
	}
	if !m.rule.Ready() {
		return p, false
	}
	for _, h := range hints {
		e := &earlyRead{hint: h}
		var resource string
		switch {
		case h.Artifact != (workspace.ArtifactRef{}):
			id := h.Artifact.ID
			if id == "" {
				id = m.names[h.Artifact.Name]
			}
			a, known := m.artifacts[id]
			if !known || h.Artifact.Name != "" && a.Name != h.Artifact.Name {
				return prediction{}, false
			}
			a.Labels = maps.Clone(a.Labels) // the engine's to keep
			e.artifact = a
			resource = workspace.ArtifactResource(a.Name)
		case h.Lease != "":
			resource = h.Lease
		default:
			return prediction{}, false
		}
		l, known := m.leases[resource]
		if !known {
			return prediction{}, false
		}
		e.lease.resource = resource
		if l == nil {
			e.lease.err = pgx.ErrNoRows
		} else {
			e.lease.lease = *l
		}
		p.early = append(p.early, e)
	}
	p.now = clock(time.Now().Add(m.offset))
	if p.now.Before(m.now) {
		p.now = m.now
	}
	p.head, p.notify = m.head, m.notify
	return p, true
}

// failed notes a prediction the database refused: everything known is
// dropped, and the next waits for more quiet transactions.
func (m *memo) failed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget()
	m.rule.Failed()
}

// prediction is what a predicted transaction runs on: the reads ahead of
// its hints (each an artifact with its lease, or a lease; a lease read as
// absent has ErrNoRows), its clock, the head, and whether to notify.
type prediction struct {
	early  []*earlyRead
	now    time.Time
	head   int64
	notify bool
}

// checked are the records the guard checks: the artifacts predicted, the
// leases predicted present, and the resources of those predicted absent.
func (p prediction) checked() (artifacts []workspace.Artifact, leases []workspace.Lease, absent []string) {
	for _, e := range p.early {
		if e.hint.Artifact != (workspace.ArtifactRef{}) {
			artifacts = append(artifacts, e.artifact)
		}
		if e.lease.err != nil {
			absent = append(absent, e.lease.resource)
		} else {
			leases = append(leases, e.lease.lease)
		}
	}
	return artifacts, leases, absent
}

// learned is what a committed transaction tells the memo.
type learned struct {
	// tx is the transaction: its head, clock and notify flag as it
	// committed, and its writes of artifacts and leases.
	tx *writeTx
	// alone is false when another transaction of the store overlapped it:
	// then what it saw may already be old, and the memo starts over.
	alone bool
	// predicted is set when it ran on a prediction (the offset is kept).
	predicted bool
	// start is the head it began on (read, or predicted).
	start  int64
	offset time.Duration
	// reads are the hinted records as read (or predicted) at its start.
	reads []*earlyRead
}

// memoWrite is a write a transaction made: an artifact put or deleted, or
// a lease put.
type memoWrite struct {
	artifact workspace.Artifact
	deleted  string
	lease    *workspace.Lease
}

// learn records what a committed transaction read and wrote.
func (m *memo) learn(l learned) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tx := l.tx
	// Unsure: a write may not have been kept (a savepoint was rolled
	// back), or records were written without an event.
	unsure := tx.unsure || tx.seq == l.start && len(tx.wrote) > 0
	if !l.alone || unsure || m.valid && tx.seq < m.head {
		m.forget()
		return
	}
	m.rule.Commit(!m.valid || l.start == m.head)
	if l.predicted {
		m.rule.Held()
	} else {
		m.offset = l.offset
	}
	m.valid, m.head, m.now, m.notify = true, tx.seq, tx.now, tx.notify
	if m.artifacts == nil || len(m.artifacts) > memoLimit || len(m.leases) > memoLimit {
		m.artifacts, m.names, m.leases = map[string]workspace.Artifact{}, map[string]string{}, map[string]*workspace.Lease{}
	}
	for _, e := range l.reads {
		switch {
		case e.hint.Artifact != (workspace.ArtifactRef{}):
			if e.err == nil {
				m.putArtifact(e.artifact)
			}
			if e.lease.resource == "" {
				continue
			}
		case e.hint.Lease == "":
			continue
		}
		if e.lease.err == nil {
			lease := e.lease.lease
			m.leases[e.lease.resource] = &lease
		} else if errors.Is(e.lease.err, pgx.ErrNoRows) {
			m.leases[e.lease.resource] = nil
		}
	}
	for _, w := range tx.wrote {
		switch {
		case w.lease != nil:
			m.leases[w.lease.Resource] = w.lease
		case w.deleted != "":
			if a, ok := m.artifacts[w.deleted]; ok {
				delete(m.names, a.Name)
				delete(m.artifacts, w.deleted)
			}
		default:
			m.putArtifact(w.artifact)
		}
	}
}

func (m *memo) putArtifact(a workspace.Artifact) {
	if old, ok := m.artifacts[a.ID]; ok && old.Name != a.Name {
		delete(m.names, old.Name)
	}
	a.Labels = nilIfEmpty(maps.Clone(a.Labels)) // the caller's may change; as a read returns them
	m.artifacts[a.ID] = a
	m.names[a.Name] = a.ID
}

// guardSQL fails (casting text that is no number) unless the values a
// predicted transaction ran on hold: the head ($1); its clock ($2) no
// later than the database's nor more than 100 ms behind it (leases are
// timed by the database's clock); whether another store than $3 listens
// ($4); each artifact (ID, name, version: $5-$7) live as it was; each
// lease ($8-$12) as it was; and the leases known to be absent ($13). Each
// record is looked up by its key in a subquery per element, which the
// planner runs as a probe of the key's index whatever it estimates (an
// EXISTS would become a join, planned by statistics that a new table
// lacks). Its arrays make it the kind of statement genericOn is for.
const guardSQL = `SELECT CASE WHEN c.seq = $1
		AND $2::timestamptz BETWEEN clock_timestamp() - interval '100 milliseconds' AND clock_timestamp()
		AND EXISTS (SELECT 1 FROM listeners WHERE store <> $3 AND expires_at > clock_timestamp()) = $4
		AND NOT EXISTS (SELECT 1 FROM unnest($5::text[], $6::text[], $7::bigint[]) AS g(id, name, version)
			WHERE (SELECT a.version FROM artifacts a WHERE a.id = g.id AND a.name = g.name AND NOT a.deleted)
				IS DISTINCT FROM g.version)
		AND NOT EXISTS (SELECT 1 FROM unnest($8::text[], $9::text[], $10::bigint[], $11::timestamptz[], $12::timestamptz[])
				AS g(resource, owner, token, acquired_at, expires_at)
			WHERE NOT coalesce((SELECT l.owner = g.owner AND l.token = g.token AND l.acquired_at = g.acquired_at
				AND l.expires_at = g.expires_at FROM leases l WHERE l.resource = g.resource), false))
		AND NOT EXISTS (SELECT 1 FROM unnest($13::text[]) AS g(resource)
			WHERE (SELECT true FROM leases l WHERE l.resource = g.resource))
	THEN '' ELSE ('agentspace: the state a predicted write ran on changed (head ' || c.seq || ')')::bigint::text
	END FROM counters c`

// guardOneSQL is guardSQL for at most one artifact ($5-$7; an ID of ”
// and a NULL version for none) and one lease ($8, ” for none), present
// ($9) with its fields ($10-$13) or absent: a write of one record, the
// most common. Each subquery runs whatever the arguments, so that a plan
// made for them costs what the generic plan does: the server keeps the
// generic one, without genericOn.
const guardOneSQL = `SELECT CASE WHEN c.seq = $1
		AND $2::timestamptz BETWEEN clock_timestamp() - interval '100 milliseconds' AND clock_timestamp()
		AND EXISTS (SELECT 1 FROM listeners WHERE store <> $3 AND expires_at > clock_timestamp()) = $4
		AND (SELECT a.version FROM artifacts a WHERE a.id = $5 AND a.name = $6 AND NOT a.deleted)
			IS NOT DISTINCT FROM $7::bigint
		AND (SELECT coalesce(l.owner = $10 AND l.token = $11 AND l.acquired_at = $12 AND l.expires_at = $13, false)
			FROM leases l WHERE l.resource = $8) IS NOT DISTINCT FROM $9::boolean
	THEN '' ELSE ('agentspace: the state a predicted write ran on changed (head ' || c.seq || ')')::bigint::text
	END FROM counters c`

// one reports whether guardOneSQL can check p.
func (p prediction) one() bool {
	artifacts, leases, absent := p.checked()
	return len(artifacts) <= 1 && len(leases)+len(absent) <= 1
}

// guardOneArgs are guardOneSQL's arguments for p (see one).
func (p prediction) guardOneArgs(id string) []any {
	var (
		artifactID, name, resource string
		version                    *int64
		present                    *bool
		lease                      workspace.Lease
		artifacts, leases, absent  = p.checked()
	)
	if len(artifacts) == 1 {
		a := artifacts[0]
		artifactID, name, version = a.ID, a.Name, &a.Version
	}
	switch {
	case len(leases) == 1:
		lease, resource, present = leases[0], leases[0].Resource, new(true)
	case len(absent) == 1:
		resource = absent[0]
	}
	return []any{p.head, p.now, id, p.notify, artifactID, name, version, resource, present,
		lease.Owner, lease.Token, lease.AcquiredAt, lease.ExpiresAt}
}

// guardArgs are guardSQL's arguments for p, the store being id.
func (p prediction) guardArgs(id string) []any {
	artifacts, leases, absent := p.checked()
	var (
		ids, names        = make([]string, len(artifacts)), make([]string, len(artifacts))
		versions          = make([]int64, len(artifacts))
		res, owners       = make([]string, len(leases)), make([]string, len(leases))
		tokens            = make([]int64, len(leases))
		acquired, expires = make([]time.Time, len(leases)), make([]time.Time, len(leases))
	)
	for i, a := range artifacts {
		ids[i], names[i], versions[i] = a.ID, a.Name, a.Version
	}
	for i, l := range leases {
		res[i], owners[i], tokens[i], acquired[i], expires[i] = l.Resource, l.Owner, l.Token, l.AcquiredAt, l.ExpiresAt
	}
	if absent == nil {
		absent = []string{}
	}
	return []any{p.head, p.now, id, p.notify, ids, names, versions, res, owners, tokens, acquired, expires, absent}
}

// writers counts a store's write transactions: how many run, and how many
// ever started, so a transaction can tell whether another overlapped it.
type writers struct {
	running atomic.Int64
	started atomic.Int64
}

// begin counts a transaction in and reports whether it runs alone, with
// the count of starts to compare at its end.
func (w *writers) begin() (alone bool, start int64) {
	start = w.started.Add(1)
	return w.running.Add(1) == 1, start
}

// still reports whether a transaction that began alone has run alone so
// far: none began after it. It is asked before the transaction's memo is
// learned and the transaction counted out, so one that begins in between
// does not run alone (nor predict from a memo not yet learned).
func (w *writers) still(alone bool, start int64) bool {
	return alone && w.started.Load() == start
}

// end counts a transaction out.
func (w *writers) end() { w.running.Add(-1) }
