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
	"github.com/agentspace/agentspace/workspace/driver"
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
func (m *memo) predict(hints []driver.ReadHint, heard int64) (p prediction, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.valid || len(hints) == 0 || heard > m.head {
		return p, false
	}
	if !m.rule.Ready() {
		return p, false
	}
	reads := make([]earlyRead, len(hints)) // one allocation for the group's reads
	p.early = make([]*earlyRead, 0, len(hints))
	for i, h := range hints {
		e := &reads[i]
		e.hint = h
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
//
// Each fact a prediction relies on, where the memo learns it, and where it
// is checked before a commit relies on it. "The guard" is guardSQL or
// guardOneSQL, whose placeholders are the fields of guardParams and
// guardOneParams. What the guard checks holds to the COMMIT: the guard
// runs after lockWrite in the same batch (updatePredicted, store.go), and
// every writer of the schema, and every listener's registration, takes
// that lock first.
//
//	fact                  learned                                   checked
//	--------------------  ----------------------------------------  ----------------------------------------
//	the memo is what the  memo.learn (predict.go), from a commit    memo.predict: m.valid; updateOnce
//	store's last commit   that ran alone (writers.begin and still,  (store.go) predicts only in a transaction
//	left                  predict.go; updateOnce and                that began alone (writers.begin)
//	                      updatePredicted, store.go), whose writes
//	                      were all kept (writeTx.unsure, set by
//	                      RollbackSavepoint, savepoint.go) and, if
//	                      any, moved the head, at a head no lower
//	                      than the memo's; memo.drop and
//	                      memo.failed (from store.go) forget it
//	the head: no other    memo.learn: writeTx.seq, read by          memo.predict: NotifiedHead (store.go;
//	store committed       startWrite after lockWrite (updateOnce,   listener.heard, listen.go: the highest
//	since the store's     store.go) or predicted, moved by          seq another store's NOTIFY announced) is
//	last commit           AppendEvents (events.go)                  not above it, which only spares a guard
//	                                                                that would fail; the guard: $1 (head)
//	the clock: no later   offset: updateOnce (store.go), the        the guard: $2 (now) between
//	than the database's,  database's clock from startWrite minus    clock_timestamp() - 100 ms and
//	nor more than 100 ms  ours once its answer came, kept by        clock_timestamp(); not behind the last
//	behind it, nor behind memo.learn for usual transactions only;   commit's: memo.predict raises it to
//	the last commit's     m.now: memo.learn, writeTx.now            m.now, and the head check makes that
//	                                                                commit the last
//	whether another       memo.learn: writeTx.notify, from          the guard: $3 (store) and $4 (notify)
//	store listens         startWrite's EXISTS over listeners
//	                      (updateOnce, store.go)
//	each hinted artifact  memo.learn: the reads the transaction     memo.predict: every hinted artifact is
//	is live with that     started with (learned.reads: earlyReads   known by its ID or name and has the name
//	ID, name and version  queueAll in updateOnce, or the            hinted, else no prediction; the
//	                      prediction's own) and its writes          guard: $5-$7 (guardParams: artifactIDs,
//	                      (writeTx.wrote: PutArtifact,              artifactNames, artifactVersions;
//	                      DeleteArtifact, records.go)               guardOneParams: artifactID, ...)
//	each hinted record's  memo.learn: learned.reads (leaseAhead,    memo.predict: every lease is known,
//	lease has these       ErrNoRows for an absent one) and          present or absent, else no prediction;
//	fields, or is absent  writeTx.wrote (PutLease, records.go)      the guard: guardParams $8-$12 present,
//	                                                                $13 absent; guardOneParams $8-$13
//	the transaction       -                                         memo.predict: a hint of a note, task or
//	reads nothing else                                              claim is never predicted; pipeline.send
//	                                                                (pipeline.go) fails any read with
//	                                                                errUnpredicted, and updatePredicted
//	                                                                (store.go) then sends nothing
//
// One more input is no fact but a heuristic that decides when a prediction
// is tried, never whether it may commit: that the store has written alone
// long enough (quiet.Rule, internal/quiet). memo.learn counts the commits
// that found the head where the store's last commit left it (Commit), and
// a predicted commit halves the count needed (Held); a refused guard
// doubles it (memo.failed, from updatePredicted: Failed); memo.predict
// asks Ready.
type prediction struct {
	early  []*earlyRead
	now    time.Time
	head   int64
	notify bool
}

// checked are the records the guard checks: the artifacts predicted, the
// leases predicted present, and the resources of those predicted absent.
func (p prediction) checked() (artifacts []workspace.Artifact, leases []workspace.Lease, absent []string) {
	artifacts = make([]workspace.Artifact, 0, len(p.early))
	leases = make([]workspace.Lease, 0, len(p.early))
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
// predicted transaction ran on hold. Its placeholders are guardParams'
// fields: the head ($1 head); its clock ($2 now) no later than the
// database's nor more than 100 ms behind it (leases are timed by the
// database's clock); whether another store than $3 (store) listens ($4
// notify); each artifact ($5 artifactIDs, $6 artifactNames, $7
// artifactVersions) live as it was; each lease ($8 leaseResources, $9
// leaseOwners, $10 leaseTokens, $11 leaseAcquired, $12 leaseExpires) as it
// was; and the leases known to be absent ($13 absent). Each record is
// looked up by its key in a subquery per element, which the planner runs
// as a probe of the key's index whatever it estimates (an EXISTS would
// become a join, planned by statistics that a new table lacks). Its arrays
// make it the kind of statement genericOn is for.
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

// guardOneSQL is guardSQL for at most one artifact and one lease: a write
// of one record, the most common. Its placeholders are guardOneParams'
// fields: $1-$4 as guardSQL's; the artifact ($5 artifactID, $6
// artifactName, $7 artifactVersion; an ID of ” and a NULL version for
// none); the lease ($8 leaseResource, ” for none), present ($9
// leasePresent) with its fields ($10 leaseOwner, $11 leaseToken, $12
// leaseAcquired, $13 leaseExpires) or absent. Each subquery runs whatever
// the arguments, so that a plan made for them costs what the generic plan
// does: the server keeps the generic one, without genericOn.
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

// guardBasis are the placeholders guardSQL and guardOneSQL share: what a
// predicted transaction ran on besides its records.
type guardBasis struct {
	head   int64     // $1: the event log's head
	now    time.Time // $2: the transaction's clock
	store  string    // $3: the store's id, whose own registration is not another's
	notify bool      // $4: whether another store listens
}

// guardParams are guardSQL's placeholders, one field each; the arrays of
// one record kind are parallel, an element per record.
type guardParams struct {
	guardBasis                   // $1-$4
	artifactIDs      []string    // $5: the artifacts predicted
	artifactNames    []string    // $6: their names
	artifactVersions []int64     // $7: their versions
	leaseResources   []string    // $8: the leases predicted present
	leaseOwners      []string    // $9: their owners
	leaseTokens      []int64     // $10: their tokens
	leaseAcquired    []time.Time // $11: when they were acquired
	leaseExpires     []time.Time // $12: when they expire
	absent           []string    // $13: the resources of leases predicted absent
}

// newGuardParams are guardSQL's placeholders for p, the store being id.
func newGuardParams(p prediction, id string) guardParams {
	artifacts, leases, absent := p.checked()
	g := guardParams{
		guardBasis:       guardBasis{head: p.head, now: p.now, store: id, notify: p.notify},
		artifactIDs:      make([]string, len(artifacts)),
		artifactNames:    make([]string, len(artifacts)),
		artifactVersions: make([]int64, len(artifacts)),
		leaseResources:   make([]string, len(leases)),
		leaseOwners:      make([]string, len(leases)),
		leaseTokens:      make([]int64, len(leases)),
		leaseAcquired:    make([]time.Time, len(leases)),
		leaseExpires:     make([]time.Time, len(leases)),
		absent:           absent,
	}
	for i, a := range artifacts {
		g.artifactIDs[i], g.artifactNames[i], g.artifactVersions[i] = a.ID, a.Name, a.Version
	}
	for i, l := range leases {
		g.leaseResources[i], g.leaseOwners[i], g.leaseTokens[i] = l.Resource, l.Owner, l.Token
		g.leaseAcquired[i], g.leaseExpires[i] = l.AcquiredAt, l.ExpiresAt
	}
	if g.absent == nil {
		g.absent = []string{} // an empty array, not NULL
	}
	return g
}

// args are g's fields in placeholder order, $1 first; the text arrays go
// as text[] literals (textArray).
func (g guardParams) args() []any {
	return []any{g.head, g.now, g.store, g.notify,
		textArray(g.artifactIDs), textArray(g.artifactNames), g.artifactVersions,
		textArray(g.leaseResources), textArray(g.leaseOwners), g.leaseTokens, g.leaseAcquired, g.leaseExpires,
		textArray(g.absent)}
}

// guardOneParams are guardOneSQL's placeholders, one field each. Without
// an artifact its ID is "" and its version nil (NULL); without a lease its
// resource is "", and a lease predicted absent has leasePresent nil
// (NULL) and zero fields.
type guardOneParams struct {
	guardBasis                // $1-$4
	artifactID      string    // $5: the artifact predicted
	artifactName    string    // $6: its name
	artifactVersion *int64    // $7: its version
	leaseResource   string    // $8: the lease predicted
	leasePresent    *bool     // $9: true when predicted present
	leaseOwner      string    // $10: its owner
	leaseToken      int64     // $11: its token
	leaseAcquired   time.Time // $12: when it was acquired
	leaseExpires    time.Time // $13: when it expires
}

// newGuardOneParams are guardOneSQL's placeholders for p (see one), the
// store being id.
func newGuardOneParams(p prediction, id string) guardOneParams {
	artifacts, leases, absent := p.checked()
	g := guardOneParams{guardBasis: guardBasis{head: p.head, now: p.now, store: id, notify: p.notify}}
	if len(artifacts) == 1 {
		a := artifacts[0]
		g.artifactID, g.artifactName, g.artifactVersion = a.ID, a.Name, &a.Version
	}
	switch {
	case len(leases) == 1:
		l := leases[0]
		g.leaseResource, g.leasePresent = l.Resource, new(true)
		g.leaseOwner, g.leaseToken, g.leaseAcquired, g.leaseExpires = l.Owner, l.Token, l.AcquiredAt, l.ExpiresAt
	case len(absent) == 1:
		g.leaseResource = absent[0]
	}
	return g
}

// args are g's fields in placeholder order, $1 first.
func (g guardOneParams) args() []any {
	return []any{g.head, g.now, g.store, g.notify,
		g.artifactID, g.artifactName, g.artifactVersion,
		g.leaseResource, g.leasePresent, g.leaseOwner, g.leaseToken, g.leaseAcquired, g.leaseExpires}
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
