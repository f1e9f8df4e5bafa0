package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// A read of one record (a Get of an artifact's head with its content, of a
// note, a task, a lease) is one statement: SQLite runs a statement outside
// a transaction on one snapshot, so it needs no BEGIN, no read of the
// log's floor, no COMMIT.

// viewed is what a read-ahead view read: the artifact the hint names,
// and its head's content.
type viewed struct {
	ref     workspace.ArtifactRef
	a       workspace.Artifact
	content []byte
	found   bool // the content's row was there
}

// ViewHinted implements driver.HintedViewer for a read of one record:
// an artifact's head with its content (one joined statement, then fn on a
// readTx whose every other statement fails with sql.ErrTxDone), or a note,
// a task, a lease (fn's first statement runs outside a transaction; see
// viewOne). Other reads are plain Views. If fn reads anything else, or the
// artifact was not found, or the statement failed, fn runs again in a
// View, which decides.
func (s *store) ViewHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	if len(hints) != 1 || s.ended == nil {
		return s.View(ctx, fn)
	}
	switch h := hints[0]; {
	case h.Artifact != (workspace.ArtifactRef{}) && h.Content:
		return s.viewArtifact(ctx, h.Artifact, fn)
	case h.NoteKey != "" || h.Task != "" || h.Lease != "":
		return s.viewOne(ctx, fn)
	}
	return s.View(ctx, fn)
}

// viewArtifact reads the head of the artifact ref names and its content in
// one statement, and runs fn on them.
func (s *store) viewArtifact(ctx context.Context, ref workspace.ArtifactRef, fn func(tx driver.ReadTx) error) error {
	v := &viewed{ref: ref}
	q, arg := qViewByName, ref.Name
	if ref.ID != "" {
		q, arg = qViewByID, ref.ID
	}
	var row *sql.Row
	if stmt := s.rs.get(q); stmt != nil {
		row = stmt.QueryRowContext(ctx, arg)
	} else {
		row = s.r.QueryRowContext(ctx, q, arg) // its first run: prepared after it
	}
	var err error
	v.a, err = scanArtifact(row, &v.found, &v.content)
	s.rs.prepareWanted(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.View(ctx, fn)
	}
	err = fn(&readTx{q: txq{tx: s.ended, cache: s.rs}, now: now(), viewed: v})
	if errors.Is(err, sql.ErrTxDone) {
		return s.View(ctx, fn)
	}
	return err
}

// takeViewed returns the artifact a read-ahead view read for ref, if any.
func (t *readTx) takeViewed(ref workspace.ArtifactRef) (workspace.Artifact, bool) {
	if t.viewed == nil || t.viewed.ref != ref {
		return workspace.Artifact{}, false
	}
	return t.viewed.a, true
}

// viewedContent returns the content a read-ahead view read, if it is that
// of version version of artifact id, with hash sha256.
func (t *readTx) viewedContent(id string, version int64, sha256 string) ([]byte, bool, error) {
	v := t.viewed
	if v == nil || v.a.ID != id || v.a.Version != version || v.a.SHA256 != sha256 {
		return nil, false, nil
	}
	if !v.found {
		return nil, true, notFound(sql.ErrNoRows, fmt.Sprintf("artifact %s version %d content %s", id, version, sha256))
	}
	return v.content, true, nil
}

// viewOne runs fn, a read of one record, with its first statement outside
// a transaction: one snapshot. Should fn run a second statement, that one
// fails with sql.ErrTxDone and fn runs again in a View.
func (s *store) viewOne(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	q := &oneStatement{db: s.r, cache: s.rs, ended: txq{tx: s.ended, cache: s.rs}}
	err := fn(&readTx{q: q, now: now()})
	s.rs.prepareWanted(ctx)
	if !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return s.View(ctx, fn)
}

// oneStatement runs the first statement on the read pool, outside a
// transaction, and every later one on ended.
type oneStatement struct {
	db    *sql.DB
	cache *stmtCache
	ended txq
	used  bool
}

// first reports whether the statement to run is the first, and marks it run.
func (q *oneStatement) first() bool {
	f := !q.used
	q.used = true
	return f
}

func (q *oneStatement) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	q.used = true // a view writes nothing: never run one outside the transaction
	return q.ended.ExecContext(ctx, query, args...)
}

func (q *oneStatement) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if !q.first() {
		return q.ended.QueryContext(ctx, query, args...)
	}
	if st := q.cache.get(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.db.QueryContext(ctx, query, args...)
}

func (q *oneStatement) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !q.first() {
		return q.ended.QueryRowContext(ctx, query, args...)
	}
	if st := q.cache.get(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.db.QueryRowContext(ctx, query, args...)
}
