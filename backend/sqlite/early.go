package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentspace/agentspace/workspace"
)

// A group's artifacts read ahead. The committer hints the records its
// jobs' ops will read first; with two or more artifacts among them, a
// write transaction reads their heads and leases in one statement per kind
// of reference (IDs, names) rather than one each. Each read is taken once,
// by the op's own read of that artifact; a write of the artifact or of its
// lease drops the reads it makes stale.

// maxEarly bounds the artifacts a transaction reads ahead (with
// qArtifactLeaseByIDs and qArtifactLeaseByNames).
const maxEarly = 64

// earlyHead is an artifact's head and lease read ahead for ref (by ID or
// by name); found is false when no live artifact matched.
type earlyHead struct {
	ref   workspace.ArtifactRef
	found bool
	a     workspace.Artifact
	lease *leaseRead
}

// readAhead reads the hinted artifacts, when there are two or more.
func (t *writeTx) readAhead(ctx context.Context, hints []workspace.ReadHint) error {
	var ids, names []string
	for _, h := range hints {
		switch r := h.Artifact; {
		case r.ID != "" && !slices.Contains(ids, r.ID):
			ids = append(ids, r.ID)
		case r.ID == "" && r.Name != "" && !slices.Contains(names, r.Name):
			names = append(names, r.Name)
		}
		if len(ids)+len(names) == maxEarly {
			break
		}
	}
	if len(ids)+len(names) < 2 {
		return nil
	}
	var found []earlyHead
	for _, q := range []struct {
		sql  string
		keys []string
	}{{qArtifactLeaseByIDs, ids}, {qArtifactLeaseByNames, names}} {
		if len(q.keys) == 0 {
			continue
		}
		keys, err := json.Marshal(q.keys)
		if err != nil {
			return err
		}
		rows, err := t.q.QueryContext(ctx, q.sql, string(keys))
		if err != nil {
			return fmt.Errorf("sqlite: read artifacts ahead: %w", err)
		}
		for rows.Next() {
			a, lr, err := scanArtifactLease(rows)
			if err != nil {
				_ = rows.Close()
				return err
			}
			found = append(found, earlyHead{found: true, a: a, lease: lr})
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("sqlite: read artifacts ahead: %w", err)
		}
	}
	for _, id := range ids {
		e := earlyHead{ref: workspace.ArtifactRef{ID: id}}
		if i := slices.IndexFunc(found, func(f earlyHead) bool { return f.a.ID == id }); i >= 0 {
			e.found, e.a, e.lease = true, found[i].a, found[i].lease
		}
		t.early = append(t.early, e)
	}
	for _, name := range names {
		e := earlyHead{ref: workspace.ArtifactRef{Name: name}}
		if i := slices.IndexFunc(found, func(f earlyHead) bool { return f.a.Name == name }); i >= 0 {
			e.found, e.a, e.lease = true, found[i].a, found[i].lease
		}
		t.early = append(t.early, e)
	}
	return nil
}

// takeEarly returns, and forgets, the read ahead of ref, if there is one.
func (t *writeTx) takeEarly(ref workspace.ArtifactRef) (earlyHead, bool) {
	i := slices.IndexFunc(t.early, func(e earlyHead) bool {
		if ref.ID != "" {
			return e.ref.ID == ref.ID
		}
		return e.ref.ID == "" && e.ref.Name == ref.Name
	})
	if i < 0 {
		return earlyHead{}, false
	}
	e := t.early[i]
	t.early = slices.Delete(t.early, i, i+1)
	return e, true
}

// dropEarly forgets the reads ahead a write makes stale: those of artifact
// id (asked for by ID, or found by name), those asked for by name (the
// write may create or rename an artifact to it), and those whose lease is
// resource. Empty arguments match nothing.
func (t *writeTx) dropEarly(id, name, resource string) {
	if len(t.early) == 0 {
		return
	}
	t.early = slices.DeleteFunc(t.early, func(e earlyHead) bool {
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
	)
	a, err := scanArtifact(sc, &resource, &owner, &token, &acquired, &expires)
	if err != nil {
		return a, nil, err
	}
	lr := &leaseRead{resource: "artifact:" + a.Name, found: resource.Valid}
	if lr.found {
		lr.lease = workspace.Lease{Resource: resource.String, Owner: owner.String, Token: token.Int64,
			AcquiredAt: fromNullMicros(acquired), ExpiresAt: fromNullMicros(expires)}
	}
	return a, lr, nil
}
