package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/workspace"
)

// A read of one artifact with its head's content (a Get) is one statement:
// SQLite runs a statement outside a transaction on one snapshot, so it
// needs no BEGIN, no read of the log's floor, no COMMIT.

// viewed is what a read-ahead view read: the artifact the hint names,
// and its head's content.
type viewed struct {
	ref     workspace.ArtifactRef
	a       workspace.Artifact
	content []byte
	found   bool // the content's row was there
}

// ViewHinted implements workspace.HintedViewer for a read of one artifact
// and its head's content; other reads are plain Views. fn runs on what the
// statement returned, on a readTx whose every other statement fails with
// sql.ErrTxDone; if fn reads anything else, or the artifact was not found,
// or the statement failed, fn runs again in a View, which decides.
func (s *store) ViewHinted(ctx context.Context, hints []workspace.ReadHint, fn func(tx workspace.ReadTx) error) error {
	stmt := s.rs.stmts[qViewByName]
	if len(hints) != 1 || hints[0].Artifact == (workspace.ArtifactRef{}) || !hints[0].Content || stmt == nil || s.ended == nil {
		return s.View(ctx, fn)
	}
	v := &viewed{ref: hints[0].Artifact}
	arg := v.ref.Name
	if v.ref.ID != "" {
		stmt, arg = s.rs.stmts[qViewByID], v.ref.ID
	}
	var err error
	v.a, err = scanArtifact(stmt.QueryRowContext(ctx, arg), &v.found, &v.content)
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
