package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

const (
	eventCols = `seq, time, actor, type, subject_kind, subject_id, subject_name, version, message`
	// The head survives compaction of the whole log: it is at least floor-1.
	qHead      = `SELECT max(coalesce((SELECT max(seq) FROM events), 0), floor - 1) FROM meta WHERE id = 1`
	qFloor     = `SELECT floor FROM meta WHERE id = 1`
	qEventsAll = `SELECT ` + eventCols + ` FROM events WHERE seq > ? ORDER BY seq LIMIT ?`
	qPutEvent  = `INSERT INTO events (` + eventCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qCompact   = `DELETE FROM events WHERE seq < ?`
	qSetFloor  = `UPDATE meta SET floor = ? WHERE id = 1`
)

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

// Events applies every filter of q in SQL, with placeholders.
func (t *readTx) Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error) {
	var b strings.Builder
	b.WriteString(`SELECT ` + eventCols + ` FROM events WHERE seq > ?`)
	args := []any{q.AfterSeq}
	switch len(q.Types) {
	case 0:
	case 1:
		b.WriteString(` AND type = ?`)
	default:
		// "+type" keeps the planner off events_type: merging several types'
		// index ranges needs a sort of every match past AfterSeq on every
		// page, while walking seq order stops at Limit matches.
		b.WriteString(` AND +type IN (?` + strings.Repeat(`, ?`, len(q.Types)-1) + `)`)
	}
	for _, typ := range q.Types {
		args = append(args, typ)
	}
	for _, f := range []struct{ col, val string }{
		{"actor", q.Actor},
		{"subject_kind", q.SubjectKind},
		{"subject_id", q.SubjectID},
		{"subject_name", q.SubjectName},
	} {
		if f.val != "" {
			b.WriteString(` AND ` + f.col + ` = ?`)
			args = append(args, f.val)
		}
	}
	if !q.Since.IsZero() {
		b.WriteString(` AND time >= ?`)
		args = append(args, micros(q.Since))
	}
	if !q.Until.IsZero() {
		b.WriteString(` AND time < ?`)
		args = append(args, micros(q.Until))
	}
	b.WriteString(` ORDER BY seq LIMIT ?`)
	args = append(args, limitArg(q.Limit))
	rows, err := t.q.QueryContext(ctx, b.String(), args...)
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
func (t *writeTx) AppendEvents(ctx context.Context, events []workspace.Event) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	head, err := t.Head(ctx)
	if err != nil {
		return 0, err
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
		if _, err := t.q.ExecContext(ctx, qPutEvent, seq, micros(e.Time), e.Actor, e.Type,
			e.Subject.Kind, e.Subject.ID, e.Subject.Name, e.Version, e.Message); err != nil {
			return 0, fmt.Errorf("sqlite: append event %d: %w", seq, err)
		}
		head = seq
	}
	return first, nil
}

func (t *writeTx) CompactEvents(ctx context.Context, floor int64) error {
	if _, err := t.q.ExecContext(ctx, qCompact, floor); err != nil {
		return fmt.Errorf("sqlite: compact events: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, qSetFloor, floor); err != nil {
		return fmt.Errorf("sqlite: set event floor: %w", err)
	}
	t.floor = floor
	return nil
}
