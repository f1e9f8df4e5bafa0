package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

const eventCols = `seq, time, actor, type, subject_kind, subject_id, subject_name, version, message`

func scanEvent(row pgx.Row) (workspace.Event, error) {
	var e workspace.Event
	err := row.Scan(&e.Seq, &e.Time, &e.Actor, &e.Type, &e.Subject.Kind, &e.Subject.ID, &e.Subject.Name, &e.Version, &e.Message)
	e.Time = e.Time.UTC()
	return e, err
}

const (
	readEvents = `SELECT ` + eventCols + ` FROM events
		WHERE seq > $1
		  AND (cardinality($2::text[]) = 0 OR type = ANY ($2::text[]))
		  AND ($3 = '' OR actor = $3) AND ($4 = '' OR subject_kind = $4)
		  AND ($5 = '' OR subject_id = $5) AND ($6 = '' OR subject_name = $6)
		  AND ($7::timestamptz IS NULL OR time >= $7::timestamptz)
		  AND ($8::timestamptz IS NULL OR time < $8::timestamptz)
		ORDER BY seq LIMIT $9`
	readHead  = `SELECT seq FROM counters`
	readFloor = `SELECT floor FROM counters`

	// appendEvents hands out the seqs from the counter row (its row lock is
	// held to the commit, so seqs are gap-free in commit order), inserts the
	// events and, when $13 says another store listens, notifies the
	// listeners, which hear it on commit, with $12 (see notifyPayload). It is
	// queued, not waited for: the writer knows the first seq, $11, from the
	// head it read under the writers' lock. Should the counter say
	// otherwise, the statement fails (a text that is no number, cast to one)
	// and with it the transaction.
	//
	// The chain's recursive CTE hashes the events in order from the head's
	// hash. p's LIMIT 1 (counters has one row) keeps the planner from
	// estimating millions of rows for it, which would JIT-compile the
	// statement for a second and more.
	appendEvents = `WITH RECURSIVE p AS (
		SELECT seq AS base, hash FROM counters LIMIT 1
	), ch(n, h) AS (
		SELECT 0::bigint, p.hash FROM p
		UNION ALL
		SELECT ch.n + 1, sha256(ch.h || int8send(p.base + ch.n + 1) || ($14::bytea[])[ch.n + 1]) FROM ch, p WHERE ch.n < $1
	), c AS (
		UPDATE counters SET seq = seq + $1, hash = (SELECT h FROM ch WHERE n = $1) RETURNING seq - $1 AS base
	), ins AS (
		INSERT INTO events (` + eventCols + `, hash)
		SELECT c.base + e.n, e.time, e.actor, e.type, e.kind, e.id, e.name, e.version, e.message, ch.h
		FROM c, unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[])
			WITH ORDINALITY AS e(time, actor, type, kind, id, name, version, message, n) JOIN ch ON ch.n = e.n
	)
	SELECT CASE WHEN c.base + 1 = $11::bigint THEN CASE WHEN $13::boolean THEN pg_notify($10, $12)::text ELSE '' END
		ELSE ('agentspace: the event log head moved under the writers lock: expected ' ||
			($11::bigint - 1) || ', found ' || c.base)::bigint::text END
	FROM c`
	// appendEvent is appendEvents for one event, the common case, with
	// plain parameters, so that the server stops planning it after five
	// runs: its generic plan must cost no more than a custom one. The
	// unnest of arrays is estimated at ten rows without the arrays at hand,
	// which would make appendEvents get a custom plan, about 0.1 ms, on
	// every run of fewer events (it runs under genericOn); and LIMIT 1 (c
	// has one row) keeps the CASE, cheaper with constants, from counting
	// for the many rows the planner expects of counters before it is
	// analyzed. The event's hash chains from the head's, kept in the
	// counter row: its SET reads the old row, so no extra read is needed.
	appendEvent = `WITH c AS (
		UPDATE counters SET seq = seq + 1, hash = sha256(hash || int8send(seq + 1) || $13::bytea) RETURNING seq - 1 AS base, hash
	), ins AS (
		INSERT INTO events (` + eventCols + `, hash)
		SELECT c.base + 1, $1, $2, $3, $4, $5, $6, $7, $8, c.hash FROM c
	)
	SELECT CASE WHEN c.base + 1 = $10::bigint THEN CASE WHEN $12::boolean THEN pg_notify($9, $11)::text ELSE '' END
		ELSE ('agentspace: the event log head moved under the writers lock: expected ' ||
			($10::bigint - 1) || ', found ' || c.base)::bigint::text END
	FROM c LIMIT 1`
	// importEvents keeps the seqs given (an import), moving the head to
	// the last, and chains the events from the head's hash.
	importEvents = `WITH RECURSIVE p AS (
		SELECT hash FROM counters LIMIT 1
	), ch(n, h) AS (
		SELECT 0::bigint, p.hash FROM p
		UNION ALL
		SELECT ch.n + 1, sha256(ch.h || int8send(($11::bigint[])[ch.n + 1]) || ($12::bytea[])[ch.n + 1]) FROM ch
		WHERE ch.n < cardinality($11::bigint[])
	), c AS (
		UPDATE counters SET seq = greatest(seq, $1), hash = (SELECT h FROM ch ORDER BY n DESC LIMIT 1) RETURNING seq
	), ins AS (
		INSERT INTO events (` + eventCols + `, hash)
		SELECT e.seq, e.time, e.actor, e.type, e.kind, e.id, e.name, e.version, e.message, ch.h
		FROM unnest($11::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[])
			WITH ORDINALITY AS e(seq, time, actor, type, kind, id, name, version, message, n) JOIN ch ON ch.n = e.n
	)
	SELECT pg_notify($10, c.seq::text) FROM c`
	// compactEvents deletes the events below the new floor, from the old
	// floor up, so that its index scan does not walk the dead rows that
	// earlier compactions left for vacuum (each of gc's short batches would
	// otherwise walk all of them again), and returns the hash of the last
	// one, the chain's new base.
	compactEvents = `WITH d AS (DELETE FROM events WHERE seq >= (SELECT floor FROM counters) AND seq < $1 RETURNING seq, hash)
		SELECT hash FROM d WHERE seq = $1 - 1`
	// setFloor records the floor and the chain's base compactEvents returned.
	setFloor = `UPDATE counters SET floor = $1, floor_hash = coalesce($2, floor_hash)`
)

func (t *readTx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	types := q.Types
	if types == nil {
		types = []string{}
	}
	var since, until *time.Time
	if !q.Since.IsZero() {
		since = &q.Since
	}
	if !q.Until.IsZero() {
		until = &q.Until
	}
	rows, err := t.q.Query(ctx, readEvents, q.AfterSeq, types, q.Actor, q.SubjectKind, q.SubjectID, q.SubjectName, since, until, q.Limit)
	out, err := collect(rows, err, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("postgres: read events: %w", err)
	}
	return out, nil
}

func (t *readTx) Head(ctx context.Context) (int64, error) {
	if t.snapshot {
		return t.head, nil
	}
	var n int64
	if err := t.q.QueryRow(ctx, readHead).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: read head: %w", err)
	}
	return n, nil
}

func (t *readTx) Floor(ctx context.Context) (int64, error) {
	if t.snapshot {
		return t.floor, nil
	}
	var n int64
	if err := t.q.QueryRow(ctx, readFloor).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: read floor: %w", err)
	}
	return n, nil
}

func (t *writeTx) AppendEvents(ctx context.Context, events []workspace.Event) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n := len(events)
	if writeHook.Load() != nil {
		for _, e := range events {
			t.types, t.actors = append(t.types, e.Type), append(t.actors, e.Actor)
		}
		if hook(hookAppend, t) {
			t.notify = false
		}
	}
	if n == 1 && events[0].Seq == 0 {
		e := events[0]
		first := t.seq + 1
		_, _ = t.pl.Exec(ctx, appendEvent, e.Time, e.Actor, e.Type, e.Subject.Kind, e.Subject.ID, e.Subject.Name,
			e.Version, e.Message, t.channel, first, t.payload(first, events), t.notify, driver.ChainBody(e))
		t.seq = first
		return first, nil
	}
	var (
		seqs     = make([]int64, n)
		times    = make([]time.Time, n)
		versions = make([]int64, n)
		bodies   = make([][]byte, n)
		// The text columns go as text[] literals: pgx sends a []string
		// element by element, each boxed in an interface.
		actors   = textArrayOf(events, func(e *workspace.Event) string { return e.Actor })
		types    = textArrayOf(events, func(e *workspace.Event) string { return e.Type })
		kinds    = textArrayOf(events, func(e *workspace.Event) string { return e.Subject.Kind })
		ids      = textArrayOf(events, func(e *workspace.Event) string { return e.Subject.ID })
		names    = textArrayOf(events, func(e *workspace.Event) string { return e.Subject.Name })
		messages = textArrayOf(events, func(e *workspace.Event) string { return e.Message })
	)
	for i, e := range events {
		seqs[i], times[i], versions[i] = e.Seq, e.Time, e.Version
		bodies[i] = driver.ChainBody(e)
	}
	if events[0].Seq != 0 {
		last := events[n-1].Seq
		err := t.pl.read(ctx, rowQuery{sql: importEvents, args: []any{last, times, actors, types, kinds, ids, names, versions, messages, t.channel, seqs, bodies},
			scan: func(row pgx.Row) error { return row.Scan(nil) }})
		if err != nil {
			return 0, fmt.Errorf("postgres: import events: %w", err)
		}
		t.seq = max(t.seq, last)
		return events[0].Seq, nil
	}
	first := t.seq + 1
	// Planned once: see genericOn (already on in a predicted group).
	generic := t.pl.generic
	if !generic {
		t.pl.queue(genericOn)
	}
	_, _ = t.pl.Exec(ctx, appendEvents, int64(n), times, actors, types, kinds, ids, names, versions, messages, t.channel, first,
		t.payload(first, events), t.notify, bodies)
	if !generic {
		t.pl.queue(genericBack)
	}
	t.seq += int64(n)
	return first, nil
}

// payload is the NOTIFY payload of events numbered from first, or nothing
// when the transaction does not notify.
func (t *writeTx) payload(first int64, events []workspace.Event) string {
	if !t.notify {
		return ""
	}
	return notifyPayload(first, events)
}

// maxPayload keeps a NOTIFY payload under the server's limit of 8000 bytes.
const maxPayload = 7900

// notifyPayload is what a commit's NOTIFY says about the events it
// appended, numbered from first: the last seq, and after a space, when they
// fit, the events themselves as JSON (see payloadEvent), so that listeners
// can hand them to their subscribers without reading the log. The
// listener's parsePayload reads it back.
func notifyPayload(first int64, events []workspace.Event) string {
	last := first + int64(len(events)) - 1
	head := strconv.FormatInt(last, 10)
	out := make([]payloadEvent, len(events))
	for i, e := range events {
		out[i] = payloadEvent{Seq: first + int64(i), Time: e.Time, Actor: e.Actor, Type: e.Type,
			Kind: e.Subject.Kind, ID: e.Subject.ID, Name: e.Subject.Name, Version: e.Version, Message: e.Message}
	}
	b, err := json.Marshal(out)
	if err != nil || len(head)+1+len(b) > maxPayload {
		return head
	}
	return head + " " + string(b)
}

// payloadEvent is an event in a NOTIFY payload, with short keys: the
// payload has 8000 bytes.
type payloadEvent struct {
	Seq     int64     `json:"s"`
	Time    time.Time `json:"t"`
	Actor   string    `json:"a"`
	Type    string    `json:"y"`
	Kind    string    `json:"k,omitempty"`
	ID      string    `json:"i,omitempty"`
	Name    string    `json:"n,omitempty"`
	Version int64     `json:"v,omitempty"`
	Message string    `json:"m,omitempty"`
}

// payloadSeq reads the seq a payload announces (0 when it is not one of
// ours) and returns the rest, unparsed.
func payloadSeq(payload string) (int64, string) {
	head, rest, _ := strings.Cut(payload, " ")
	seq, err := strconv.ParseInt(head, 10, 64)
	if err != nil || seq <= 0 {
		return 0, ""
	}
	return seq, rest
}

// parsePayload reads a notification's payload: the last seq it announces
// (0 when it is not one of ours) and the events, when it carries them and
// they are numbered up to that seq without a gap.
func parsePayload(payload string) (int64, []workspace.Event) {
	seq, rest := payloadSeq(payload)
	if seq == 0 || rest == "" {
		return seq, nil
	}
	var in []payloadEvent
	if err := json.Unmarshal([]byte(rest), &in); err != nil || len(in) == 0 || in[len(in)-1].Seq != seq {
		return seq, nil
	}
	evs := make([]workspace.Event, len(in))
	for i, e := range in {
		if i > 0 && e.Seq != in[i-1].Seq+1 {
			return seq, nil
		}
		evs[i] = workspace.Event{Seq: e.Seq, Time: e.Time.UTC(), Actor: e.Actor, Type: e.Type,
			Subject: workspace.Subject{Kind: e.Kind, ID: e.ID, Name: e.Name}, Version: e.Version, Message: e.Message}
	}
	return seq, evs
}

func (t *writeTx) CompactEvents(ctx context.Context, floor int64) error {
	var base []byte
	if err := t.q.QueryRow(ctx, compactEvents, floor).Scan(&base); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: compact events: %w", err)
	}
	if _, err := t.q.Exec(ctx, setFloor, floor, base); err != nil {
		return fmt.Errorf("postgres: set event floor: %w", err)
	}
	return nil
}
