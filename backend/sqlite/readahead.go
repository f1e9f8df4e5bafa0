package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// A group's artifacts read ahead. The committer hints the records its
// jobs' ops will read first; with two or more artifacts among them, a
// write transaction reads their heads and leases in one statement per kind
// of reference (IDs, names) rather than one each. Each read is taken once,
// by the op's own read of that artifact; a write of the artifact or of its
// lease drops the reads it makes stale.

// maxReadAhead bounds the artifacts a transaction reads ahead (with
// qArtifactLeaseByIDs and qArtifactLeaseByNames).
const maxReadAhead = 64

// readAheadHead is an artifact's head and lease read ahead for ref (by ID
// or by name); found is false when no live artifact matched.
type readAheadHead struct {
	ref   workspace.ArtifactRef
	found bool
	a     workspace.Artifact
	lease *leaseRead
}

// readArtifactsAhead reads the hinted artifacts, when there are two or
// more.
func (t *writeTx) readArtifactsAhead(ctx context.Context, hints []driver.ReadHint) error {
	var refs []workspace.ArtifactRef
	var ids, names []string
	for _, h := range hints {
		if slices.ContainsFunc(t.readAhead, func(e readAheadHead) bool { return e.ref == h.Artifact }) {
			continue // known from the memo
		}
		switch r := h.Artifact; {
		case r.ID != "" && !slices.Contains(ids, r.ID):
			ids = append(ids, r.ID)
			refs = append(refs, workspace.ArtifactRef{ID: r.ID})
		case r.ID == "" && r.Name != "" && !slices.Contains(names, r.Name):
			names = append(names, r.Name)
			refs = append(refs, workspace.ArtifactRef{Name: r.Name})
		}
		if len(refs) == maxReadAhead {
			break
		}
	}
	if len(refs) < 2 {
		return nil
	}
	byID, byName := map[string]readAheadHead{}, map[string]readAheadHead{}
	for _, q := range []struct {
		sql  string
		keys []string
	}{{qArtifactLeaseByIDs, ids}, {qArtifactLeaseByNames, names}} {
		if len(q.keys) == 0 {
			continue
		}
		if err := t.readHeads(ctx, q.sql, q.keys, func(e readAheadHead) {
			byID[e.a.ID], byName[e.a.Name] = e, e
		}); err != nil {
			return fmt.Errorf("sqlite: read artifacts ahead: %w", err)
		}
	}
	for _, ref := range refs {
		e := byName[ref.Name] // not found: found is false
		if ref.ID != "" {
			e = byID[ref.ID]
		}
		e.ref = ref
		t.readAhead = append(t.readAhead, e)
	}
	return nil
}

// readHeads runs query for keys (a JSON array of IDs or names) and hands
// each live artifact it finds, with its lease, to found.
func (t *writeTx) readHeads(ctx context.Context, query string, keys []string, found func(readAheadHead)) error {
	arg, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	rows, err := t.q.QueryContext(ctx, query, string(arg))
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		a, lr, err := scanArtifactLease(rows)
		if err != nil {
			return err
		}
		found(readAheadHead{found: true, a: a, lease: lr})
	}
	return rows.Err()
}

// takeReadAhead returns, and forgets, the read ahead of ref, if there is
// one.
func (t *writeTx) takeReadAhead(ref workspace.ArtifactRef) (readAheadHead, bool) {
	i := slices.IndexFunc(t.readAhead, func(e readAheadHead) bool {
		if ref.ID != "" {
			return e.ref.ID == ref.ID
		}
		return e.ref.ID == "" && e.ref.Name == ref.Name
	})
	if i < 0 {
		return readAheadHead{}, false
	}
	e := t.readAhead[i]
	t.readAhead = slices.Delete(t.readAhead, i, i+1)
	return e, true
}

// dropReadAhead forgets the reads ahead a write makes stale: those of
// artifact id (asked for by ID, or found by name), those asked for by name
// (the write may create or rename an artifact to it), and those whose
// lease is resource. Empty arguments match nothing.
func (t *writeTx) dropReadAhead(id, name, resource string) {
	if len(t.readAhead) == 0 {
		return
	}
	t.readAhead = slices.DeleteFunc(t.readAhead, func(e readAheadHead) bool {
		return id != "" && (e.ref.ID == id || e.found && e.a.ID == id) ||
			name != "" && e.ref.Name == name ||
			resource != "" && e.lease != nil && e.lease.resource == resource
	})
}

// scanArtifactLease scans a row of qArtifactLeaseHead.
func scanArtifactLease(sc scanner) (workspace.Artifact, *leaseRead, error) {
	var (
		resource, owner          sql.NullString
		token, acquired, expires sql.NullInt64
		ttl                      sql.NullInt64
	)
	a, err := scanArtifact(sc, &resource, &owner, &token, &acquired, &expires, &ttl)
	if err != nil {
		return a, nil, err
	}
	lr := &leaseRead{resource: workspace.ArtifactResource(a.Name), found: resource.Valid}
	if lr.found {
		lr.lease = workspace.Lease{Resource: resource.String, Owner: owner.String, Token: token.Int64,
			AcquiredAt: fromNullMicros(acquired), ExpiresAt: fromNullMicros(expires), TTL: time.Duration(ttl.Int64)}
	}
	return a, lr, nil
}
