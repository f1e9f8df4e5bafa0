package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Notes, leases and idempotency keys: small keyed records.

const (
	noteCols = `kind, key, title, body, author, version, created_at, updated_at, updated_by`
	qNote    = `SELECT ` + noteCols + ` FROM notes WHERE kind = ? AND key = ?`
	// Row values compare (kind, key) pairs in primary-key order.
	qListNotes = `SELECT ` + noteCols + ` FROM notes
		WHERE (?1 = '' OR kind = ?1) AND (kind, key) > (?2, ?3)
		ORDER BY kind, key LIMIT +?4`
	// A list of one kind reads only that kind's rows: the query above,
	// bound by the row value alone, would go on through the kinds after
	// it for a page it cannot fill.
	qListKind       = `SELECT ` + noteCols + ` FROM notes WHERE kind = ?1 ORDER BY kind, key LIMIT +?4`
	qListKindAfter  = `SELECT ` + noteCols + ` FROM notes WHERE kind = ?1 AND key > ?2 ORDER BY kind, key LIMIT +?4`
	qListKindBefore = `SELECT ` + noteCols + ` FROM notes WHERE kind = ?1 AND key < ?3 ORDER BY kind, key LIMIT +?4`
	qListKindRange  = `SELECT ` + noteCols + ` FROM notes WHERE kind = ?1 AND key > ?2 AND key < ?3 ORDER BY kind, key LIMIT +?4`
	qPutNote        = `INSERT INTO notes (` + noteCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, key) DO UPDATE SET title = excluded.title, body = excluded.body,
		author = excluded.author, version = excluded.version, created_at = excluded.created_at,
		updated_at = excluded.updated_at, updated_by = excluded.updated_by`
	qDeleteNote = `DELETE FROM notes WHERE kind = ? AND key = ?`

	leaseCols   = `resource, owner, token, acquired_at, expires_at, ttl`
	qLease      = `SELECT ` + leaseCols + ` FROM leases WHERE resource = ?`
	qListLeases = `SELECT ` + leaseCols + ` FROM leases WHERE owner <> '' AND expires_at > ? ORDER BY resource`
	qLeaseRows  = `SELECT ` + leaseCols + ` FROM leases WHERE resource > ? ORDER BY resource LIMIT +?`
	qPutLease   = `INSERT INTO leases (` + leaseCols + `) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (resource) DO UPDATE SET owner = excluded.owner, token = excluded.token,
		acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, ttl = excluded.ttl`

	qIdempotent      = `SELECT result FROM idempotency WHERE key = ? AND expires_at > ?`
	qPutIdempotent   = `INSERT OR REPLACE INTO idempotency (key, result, expires_at) VALUES (?, ?, ?)`
	qPruneIdempotent = `DELETE FROM idempotency WHERE expires_at <= ?`
)

func scanNote(sc scanner) (workspace.Note, error) {
	var (
		n                workspace.Note
		created, updated int64
	)
	err := sc.Scan(&n.Kind, &n.Key, &n.Title, &n.Body, &n.Author, &n.Version, &created, &updated, &n.UpdatedBy)
	n.CreatedAt, n.UpdatedAt = fromMicros(created), fromMicros(updated)
	return n, err
}

func (t *readTx) Note(ctx context.Context, kind, key string) (workspace.Note, error) {
	n, err := scanNote(t.q.QueryRowContext(ctx, qNote, kind, key))
	if err != nil {
		return n, notFound(err, fmt.Sprintf("note %s/%s", kind, key))
	}
	return n, nil
}

func (t *readTx) ListNotes(ctx context.Context, q driver.NoteQuery) ([]workspace.Note, error) {
	query, args := qListNotes, []any{q.Kind, q.AfterKind, q.AfterKey, limitArg(q.Limit)}
	if q.Kind != "" {
		_, after, past := q.KindStart()
		if past {
			return nil, nil
		}
		switch {
		case after && q.BeforeKey != "":
			query = qListKindRange
		case after:
			query = qListKindAfter
		case q.BeforeKey != "":
			query = qListKindBefore
		default:
			query = qListKind
		}
		args = []any{q.Kind, q.AfterKey, q.BeforeKey, limitArg(q.Limit)}
	}
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list notes: %w", err)
	}
	defer rows.Close()
	var out []workspace.Note
	for rows.Next() {
		n, err := scanNote(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list notes: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list notes: %w", err)
	}
	return out, nil
}

func (t *writeTx) PutNote(ctx context.Context, n workspace.Note) error {
	if _, err := t.q.ExecContext(ctx, qPutNote, n.Kind, n.Key, n.Title, n.Body, n.Author, n.Version,
		micros(n.CreatedAt), micros(n.UpdatedAt), n.UpdatedBy); err != nil {
		return fmt.Errorf("sqlite: put note %s/%s: %w", n.Kind, n.Key, err)
	}
	return nil
}

func (t *writeTx) DeleteNote(ctx context.Context, kind, key string) error {
	res, err := t.q.ExecContext(ctx, qDeleteNote, kind, key)
	if err != nil {
		return fmt.Errorf("sqlite: delete note %s/%s: %w", kind, key, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("note %s/%s: %w", kind, key, workspace.ErrNotFound)
	}
	return nil
}

func scanLease(sc scanner) (workspace.Lease, error) {
	var (
		l                 workspace.Lease
		acquired, expires sql.NullInt64
		ttl               int64
	)
	err := sc.Scan(&l.Resource, &l.Owner, &l.Token, &acquired, &expires, &ttl)
	l.AcquiredAt, l.ExpiresAt, l.TTL = fromNullMicros(acquired), fromNullMicros(expires), time.Duration(ttl)
	return l, err
}

func (t *readTx) Lease(ctx context.Context, resource string) (workspace.Lease, error) {
	l, err := scanLease(t.q.QueryRowContext(ctx, qLease, resource))
	if err != nil {
		return l, notFound(err, fmt.Sprintf("lease %q", resource))
	}
	return l, nil
}

func (t *readTx) ListLeases(ctx context.Context, now time.Time) ([]workspace.Lease, error) {
	return t.leases(ctx, "list leases", qListLeases, micros(now))
}

// LeaseRows implements driver.ReadTx.
func (t *readTx) LeaseRows(ctx context.Context, after string, limit int) ([]workspace.Lease, error) {
	return t.leases(ctx, "lease rows", qLeaseRows, after, limit)
}

// leases runs query, which selects leaseCols, and scans its rows.
func (t *readTx) leases(ctx context.Context, what, query string, args ...any) ([]workspace.Lease, error) {
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	var out []workspace.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}

func (t *writeTx) PutLease(ctx context.Context, l workspace.Lease) error {
	t.leaseRead = nil
	t.dropReadAhead("", "", l.Resource)
	if _, err := t.q.ExecContext(ctx, qPutLease, l.Resource, l.Owner, l.Token,
		nullMicros(l.AcquiredAt), nullMicros(l.ExpiresAt), int64(l.TTL)); err != nil {
		return fmt.Errorf("sqlite: put lease %q: %w", l.Resource, err)
	}
	t.noted.leased(l)
	return nil
}

func (t *readTx) Idempotent(ctx context.Context, key string, now time.Time) ([]byte, error) {
	var b []byte
	if err := t.q.QueryRowContext(ctx, qIdempotent, key, micros(now)).Scan(&b); err != nil {
		return nil, notFound(err, fmt.Sprintf("idempotency key %q", key))
	}
	return b, nil
}

func (t *writeTx) PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error {
	if _, err := t.q.ExecContext(ctx, qPutIdempotent, key, result, micros(expires)); err != nil {
		return fmt.Errorf("sqlite: put idempotency key %q: %w", key, err)
	}
	return nil
}

func (t *writeTx) PruneIdempotent(ctx context.Context, now time.Time) error {
	if _, err := t.q.ExecContext(ctx, qPruneIdempotent, micros(now)); err != nil {
		return fmt.Errorf("sqlite: prune idempotency keys: %w", err)
	}
	return nil
}
