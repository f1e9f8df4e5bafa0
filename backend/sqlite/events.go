package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

const (
	eventCols = `seq, time, actor, type, subject_kind, subject_id, subject_name, version, message`
	// The head survives compaction of the whole log: it is at least floor-1.
	qHead      = `SELECT max(coalesce((SELECT max(seq) FROM events), 0), floor - 1) FROM meta WHERE id = 1`
	qFloor     = `SELECT floor FROM meta WHERE id = 1`
	qEventsAll = `SELECT ` + eventCols + ` FROM events WHERE seq > ? ORDER BY seq LIMIT +?`
	// qEventsFrom starts a filtered read of the log (eventsQuery).
	qEventsFrom = `SELECT ` + eventCols + ` FROM events WHERE `
	qPutEvent   = `INSERT INTO events (` + eventCols + `, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qCompact    = `DELETE FROM events WHERE seq < ?`
	// qAppendState is qHead plus where the indexed part of the log ends.
	qAppendState = `SELECT max(coalesce((SELECT max(seq) FROM events), 0), floor - 1), indexed_to,
		coalesce((SELECT hash FROM events ORDER BY seq DESC LIMIT 1), floor_hash) FROM meta WHERE id = 1`
	qIndexTail    = `UPDATE events SET indexed = 1 WHERE seq > ? AND seq <= ?`
	qSetIndexedTo = `UPDATE meta SET indexed_to = ? WHERE id = 1`
	// qSetFloor keeps the hash of the last event compacted away, so the
	// chain still verifies from the floor: it runs before qCompact.
	qSetFloor = `UPDATE meta SET floor = ?, floor_hash = coalesce((SELECT hash FROM events WHERE seq = ?), floor_hash) WHERE id = 1`
)

// DefaultIndexBatch is how many events the log's tail holds before a
// writer adds them to the filter indexes in one step (ParamIndexBatch).
const DefaultIndexBatch = 256

// MaxIndexBatch bounds ParamIndexBatch: a filtered read scans up to that
// many tail events.
const MaxIndexBatch = 4096

func (t *readTx) Head(ctx context.Context) (int64, error) {
	var head int64
	if err := t.q.QueryRowContext(ctx, qHead).Scan(&head); err != nil {
		return 0, fmt.Errorf("sqlite: event head: %w", err)
	}
	return head, nil
}

func (t *readTx) Floor(ctx context.Context) (int64, error) {
	if t.floor > 0 {
		return t.floor, nil
	}
	var floor int64
	if err := t.q.QueryRowContext(ctx, qFloor).Scan(&floor); err != nil {
		return 0, fmt.Errorf("sqlite: event floor: %w", err)
	}
	return floor, nil
}

// eventsQuery builds Events' statement and its arguments. A read filtered
// by something a filter index serves (one type, an actor, a subject's id or
// name) has two parts in one statement, so that both see one snapshot: the
// indexed events through the index, then the log's tail (seqs past
// meta.indexed_to, see AppendEvents) in seq order. Any other read walks the
// log in seq order from AfterSeq, filtering as it goes.
func eventsQuery(q workspace.EventQuery) (string, []any) {
	var (
		w       strings.Builder
		args    []any
		indexed bool
	)
	switch len(q.Types) {
	case 0:
	case 1:
		w.WriteString(` AND type = ?`)
		indexed = true
	default:
		// "+type" keeps the planner off events_type: merging several types'
		// index ranges needs a sort of every match past AfterSeq on every
		// page, while walking seq order stops at Limit matches.
		w.WriteString(` AND +type IN (?` + strings.Repeat(`, ?`, len(q.Types)-1) + `)`)
	}
	for _, typ := range q.Types {
		args = append(args, typ)
	}
	for _, f := range []struct {
		col, val string
		index    bool
	}{
		{"actor", q.Actor, true},
		{"subject_kind", q.SubjectKind, false},
		{"subject_id", q.SubjectID, true},
		{"subject_name", q.SubjectName, true},
	} {
		if f.val != "" {
			w.WriteString(` AND ` + f.col + ` = ?`)
			args = append(args, f.val)
			indexed = indexed || f.index
		}
	}
	if !q.Since.IsZero() {
		w.WriteString(` AND time >= ?`)
		args = append(args, micros(q.Since))
	}
	if !q.Until.IsZero() {
		w.WriteString(` AND time < ?`)
		args = append(args, micros(q.Until))
	}
	limit := limitArg(q.Limit)
	filters := w.String()
	all := make([]any, 0, 2*len(args)+3)
	var b strings.Builder
	b.WriteString(qEventsFrom)
	if !indexed {
		b.WriteString(`seq > ?`)
		b.WriteString(filters)
		b.WriteString(` ORDER BY seq LIMIT +?`)
		all = append(append(append(all, q.AfterSeq), args...), limit)
		return b.String(), all
	}
	// Both arms deliver seq order (the index is on (column, seq); the tail
	// is a rowid range), so the compound's ORDER BY merges them as they
	// come and stops at the limit, sorting nothing.
	b.WriteString(`indexed = 1 AND seq > ?`)
	b.WriteString(filters)
	b.WriteString(` UNION ALL `)
	b.WriteString(qEventsFrom)
	b.WriteString(`seq > max(?, (SELECT indexed_to FROM meta WHERE id = 1))`)
	b.WriteString(filters)
	b.WriteString(` ORDER BY seq LIMIT +?`)
	all = append(append(all, q.AfterSeq), args...)
	all = append(append(append(all, q.AfterSeq), args...), limit)
	return b.String(), all
}

// Events applies every filter of q in SQL, with placeholders.
func (t *readTx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	query, args := eventsQuery(q)
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read events: %w", err)
	}
	defer rows.Close()
	var out []workspace.Event
	for rows.Next() {
		var (
			e  workspace.Event
			tm int64
		)
		if err := rows.Scan(&e.Seq, &tm, &e.Actor, &e.Type, &e.Subject.Kind, &e.Subject.ID,
			&e.Subject.Name, &e.Version, &e.Message); err != nil {
			return nil, fmt.Errorf("sqlite: read events: %w", err)
		}
		e.Time = fromMicros(tm)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read events: %w", err)
	}
	return out, nil
}

// AppendEvents numbers events from the head on. The transaction holds the
// write lock (BEGIN IMMEDIATE), so no other writer can take the same seqs.
// When the log's tail (the events past meta.indexed_to, which the filter
// indexes leave out) reaches the store's index batch, it adds the whole
// tail to the indexes: one UPDATE of a seq range, whose index entries share
// leaf pages.
func (t *writeTx) AppendEvents(ctx context.Context, events []workspace.Event) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var (
		head, indexedTo int64
		prev            []byte // the hash the first event chains from
	)
	if err := t.q.QueryRowContext(ctx, qAppendState).Scan(&head, &indexedTo, &prev); err != nil {
		return 0, fmt.Errorf("sqlite: event head: %w", err)
	}
	if !t.noted.set {
		t.noted.start, t.noted.set = head, true
	}
	var first int64
	for i, e := range events {
		seq := e.Seq
		if seq == 0 {
			seq = head + 1
		}
		if seq <= head {
			return 0, &workspace.InvalidError{Field: "seq", Reason: fmt.Sprintf("event seq %d is not above the head %d", seq, head)}
		}
		if i == 0 {
			first = seq
		}
		e.Seq = seq
		prev = driver.ChainHash(prev, e)
		if _, err := t.q.ExecContext(ctx, qPutEvent, seq, micros(e.Time), e.Actor, e.Type,
			e.Subject.Kind, e.Subject.ID, e.Subject.Name, e.Version, e.Message, prev); err != nil {
			return 0, fmt.Errorf("sqlite: append event %d: %w", seq, err)
		}
		head = seq
	}
	t.noted.end = head
	if head-indexedTo >= t.indexBatch {
		if _, err := t.q.ExecContext(ctx, qIndexTail, indexedTo, head); err != nil {
			return 0, fmt.Errorf("sqlite: index events %d-%d: %w", indexedTo+1, head, err)
		}
		if _, err := t.q.ExecContext(ctx, qSetIndexedTo, head); err != nil {
			return 0, fmt.Errorf("sqlite: index events %d-%d: %w", indexedTo+1, head, err)
		}
	}
	return first, nil
}

func (t *writeTx) CompactEvents(ctx context.Context, floor int64) error {
	if _, err := t.q.ExecContext(ctx, qSetFloor, floor, floor-1); err != nil {
		return fmt.Errorf("sqlite: set event floor: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, qCompact, floor); err != nil {
		return fmt.Errorf("sqlite: compact events: %w", err)
	}
	t.floor = floor
	return nil
}
