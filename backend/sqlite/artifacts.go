package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// artifactCols are one version's metadata, from artifact_versions v.
const artifactCols = `v.artifact_id, v.version, v.name, v.kind, v.owner, v.content_type, v.sha256,
	v.size, v.labels, v.task_id, v.created_at, v.created_by, v.updated_at, v.updated_by`

const (
	qArtifactHead = `SELECT ` + artifactCols + `
		FROM artifacts h JOIN artifact_versions v ON v.artifact_id = h.id AND v.version = h.version
		WHERE h.deleted = 0 AND `
	qArtifactByID    = qArtifactHead + `h.id = ?`
	qArtifactByName  = qArtifactHead + `h.name = ?`
	qArtifactVersion = `SELECT ` + artifactCols + ` FROM artifact_versions v
		WHERE v.artifact_id = ? AND v.version = ?`
	qArtifactVersions = `SELECT ` + artifactCols + ` FROM artifact_versions v
		WHERE v.artifact_id = ? ORDER BY v.version`
	// A version names its content's row (migration 4).
	qContent = `SELECT b.content FROM artifact_versions v JOIN blobs b ON b.id = v.blob_id
		WHERE v.artifact_id = ? AND v.version = ? AND v.sha256 = ?`
	qPutHead = `INSERT INTO artifacts (id, name, version, kind, owner, task_id, deleted)
		VALUES (?, ?, ?, ?, ?, ?, 0)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, version = excluded.version,
		kind = excluded.kind, owner = excluded.owner, task_id = excluded.task_id, deleted = 0`
	// qBumpHead is PutArtifact's common case, a new version of a live head
	// whose name, kind, owner and task stay: setting only the version
	// leaves the head's four indexes untouched (a full upsert rewrites
	// their entries, four more pages in the WAL per commit).
	qBumpHead = `UPDATE artifacts SET version = ?
		WHERE id = ? AND name = ? AND kind = ? AND owner = ? AND task_id = ? AND deleted = 0`
	qPutVersion = `INSERT INTO artifact_versions (artifact_id, version, name, kind, owner, content_type,
		sha256, size, labels, task_id, created_at, created_by, updated_at, updated_by, blob_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qPutBlob = `INSERT INTO blobs (artifact_id, sha256, content) VALUES (?, ?, ?)`
	// qStoredBlob finds the row of content already stored for the
	// artifact: the newest version with the hash, which for a
	// metadata-only update is the head, the first row the walk meets.
	qStoredBlob = `SELECT blob_id FROM artifact_versions
		WHERE artifact_id = ? AND sha256 = ? AND blob_id IS NOT NULL ORDER BY version DESC LIMIT 1`
	qDeleteArtifact = `UPDATE artifacts SET deleted = 1 WHERE id = ? AND deleted = 0`
	// qVersionBlob, qDeleteVersion and qDeleteUnusedBlob remove a version
	// and then its content row if no version left uses it.
	qVersionBlob   = `SELECT blob_id FROM artifact_versions WHERE artifact_id = ? AND version = ?`
	qDeleteVersion = `DELETE FROM artifact_versions WHERE artifact_id = ? AND version = ?`
	// qDeleteUnusedBlobs takes the removed versions' blob ids as a JSON
	// array, so that the artifact's remaining versions are read once.
	qDeleteUnusedBlobs = `DELETE FROM blobs WHERE id IN (SELECT value FROM json_each(?1))
		AND id NOT IN (SELECT blob_id FROM artifact_versions WHERE artifact_id = ?2 AND blob_id IS NOT NULL)`
)

// DeleteVersions implements driver.Tx.
func (t *writeTx) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	var blobs []int64
	for _, v := range versions {
		var blob sql.NullInt64
		err := t.q.QueryRowContext(ctx, qVersionBlob, id, v).Scan(&blob)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete version %d of %s: %w", v, id, err)
		}
		if _, err := t.q.ExecContext(ctx, qDeleteVersion, id, v); err != nil {
			return fmt.Errorf("sqlite: delete version %d of %s: %w", v, id, err)
		}
		if blob.Valid {
			blobs = append(blobs, blob.Int64)
		}
	}
	if len(blobs) == 0 {
		return nil
	}
	ids, err := json.Marshal(blobs)
	if err != nil {
		return err
	}
	if _, err := t.q.ExecContext(ctx, qDeleteUnusedBlobs, string(ids), id); err != nil {
		return fmt.Errorf("sqlite: delete content of %s: %w", id, err)
	}
	return nil
}

// scanArtifact scans artifactCols, then extra.
func scanArtifact(sc scanner, extra ...any) (workspace.Artifact, error) {
	var (
		a                workspace.Artifact
		labels           sql.NullString
		created, updated int64
	)
	dest := append([]any{&a.ID, &a.Version, &a.Name, &a.Kind, &a.Owner, &a.ContentType, &a.SHA256,
		&a.Size, &labels, &a.TaskID, &created, &a.CreatedBy, &updated, &a.UpdatedBy}, extra...)
	err := sc.Scan(dest...)
	if err != nil {
		return a, err
	}
	a.CreatedAt, a.UpdatedAt = fromMicros(created), fromMicros(updated)
	if labels.Valid && labels.String != "" { // the row's key is built only then
		key := fmt.Sprintf("%s version %d", a.ID, a.Version)
		if err := decodeJSON(labels, &a.Labels, "artifact_versions", key, "labels"); err != nil {
			return a, err
		}
	}
	return a, nil
}

// headRow runs byID or byName for ref's head, and names what it looks for.
func (t *readTx) headRow(ctx context.Context, ref workspace.ArtifactRef, byID, byName string) (*sql.Row, string) {
	if ref.ID != "" {
		return t.q.QueryRowContext(ctx, byID, ref.ID), artifactWhat(ref)
	}
	return t.q.QueryRowContext(ctx, byName, ref.Name), artifactWhat(ref)
}

// artifactWhat names the artifact ref looks for, for an error.
func artifactWhat(ref workspace.ArtifactRef) string {
	if ref.ID != "" {
		return "artifact " + ref.ID
	}
	return fmt.Sprintf("artifact %q", ref.Name)
}

func (t *readTx) Artifact(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	if a, ok := t.takeViewed(ref); ok {
		return a, nil
	}
	row, what := t.headRow(ctx, ref, qArtifactByID, qArtifactByName)
	a, err := scanArtifact(row)
	if err != nil {
		return a, notFound(err, what)
	}
	return a, nil
}

// qView* read a live artifact's head metadata and content in one
// statement; found is 0 when its blob row is missing.
const (
	qViewHead = `SELECT ` + artifactCols + `, b.id IS NOT NULL, b.content
		FROM artifacts h JOIN artifact_versions v ON v.artifact_id = h.id AND v.version = h.version
		LEFT JOIN blobs b ON b.id = v.blob_id
		WHERE h.deleted = 0 AND `
	qViewByID   = qViewHead + `h.id = ?`
	qViewByName = qViewHead + `h.name = ?`
)

// A write reads the artifact it changes and then the lease that guards it,
// "artifact:NAME" as the engine names it; in a write transaction one
// statement reads both (qArtifactLeaseBy*), and Lease answers from it.
const (
	qArtifactLeaseHead = `SELECT ` + artifactCols + `, l.resource, l.owner, l.token, l.acquired_at, l.expires_at, l.ttl
		FROM artifacts h JOIN artifact_versions v ON v.artifact_id = h.id AND v.version = h.version
		LEFT JOIN leases l ON l.resource = 'artifact:' || h.name
		WHERE h.deleted = 0 AND `
	qArtifactLeaseByID   = qArtifactLeaseHead + `h.id = ?`
	qArtifactLeaseByName = qArtifactLeaseHead + `h.name = ?`
	// A group's artifacts read ahead (readahead.go): the IDs or names as a
	// JSON array.
	qArtifactLeaseByIDs   = qArtifactLeaseHead + `h.id IN (SELECT value FROM json_each(?))`
	qArtifactLeaseByNames = qArtifactLeaseHead + `h.name IN (SELECT value FROM json_each(?))`
)

// leaseRead is a lease row a write transaction read with an artifact.
type leaseRead struct {
	resource string
	lease    workspace.Lease
	found    bool
}

func (t *writeTx) Artifact(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	if e, ok := t.takeReadAhead(ref); ok {
		if !e.found {
			return workspace.Artifact{}, notFound(sql.ErrNoRows, artifactWhat(ref))
		}
		t.leaseRead = e.lease
		t.noteRead(e.a, e.lease)
		return e.a, nil
	}
	row, what := t.headRow(ctx, ref, qArtifactLeaseByID, qArtifactLeaseByName)
	a, lr, err := scanArtifactLease(row)
	if err != nil {
		return a, notFound(err, what)
	}
	t.leaseRead = lr
	t.noteRead(a, lr)
	return a, nil
}

// noteRead notes a head read with its lease for the memo.
func (t *writeTx) noteRead(a workspace.Artifact, lr *leaseRead) {
	var lease *workspace.Lease
	if lr != nil && lr.found {
		lease = &lr.lease
	}
	t.noted.entry(a, lease)
}

// Lease answers from the lease read with the transaction's last artifact
// when it is the one asked for, else reads it.
func (t *writeTx) Lease(ctx context.Context, resource string) (workspace.Lease, error) {
	if lr := t.leaseRead; lr != nil && lr.resource == resource {
		if !lr.found {
			return workspace.Lease{}, fmt.Errorf("lease %q: %w", resource, workspace.ErrNotFound)
		}
		return lr.lease, nil
	}
	return t.readTx.Lease(ctx, resource)
}

func (t *readTx) ArtifactVersion(ctx context.Context, id string, version int64) (workspace.Artifact, error) {
	a, err := scanArtifact(t.q.QueryRowContext(ctx, qArtifactVersion, id, version))
	if err != nil {
		return a, notFound(err, fmt.Sprintf("artifact %s version %d", id, version))
	}
	return a, nil
}

// qArtifactIDs pages through every artifact, live and deleted.
const qArtifactIDs = `SELECT id FROM artifacts WHERE id > ? ORDER BY id LIMIT +?`

// The store lists deleted artifacts and released leases for an export
// and gc (driver.ReadTx's ArtifactIDs and LeaseRows).
var (
	_ driver.ReadTx      = (*readTx)(nil)
	_ driver.ReadyLister = (*readTx)(nil)
)

// ArtifactIDs implements driver.ReadTx.
func (t *readTx) ArtifactIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := t.q.QueryContext(ctx, qArtifactIDs, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: artifact ids: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: artifact ids: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: artifact ids: %w", err)
	}
	return out, nil
}

func (t *readTx) ArtifactVersions(ctx context.Context, id string) ([]workspace.Artifact, error) {
	rows, err := t.q.QueryContext(ctx, qArtifactVersions, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: artifact %s versions: %w", id, err)
	}
	return collectArtifacts(rows)
}

func collectArtifacts(rows *sql.Rows) ([]workspace.Artifact, error) {
	defer rows.Close()
	var out []workspace.Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: artifacts: %w", err)
	}
	return out, nil
}

func (t *readTx) Content(ctx context.Context, id string, version int64, sha256 string) ([]byte, error) {
	if b, ok, err := t.viewedContent(id, version, sha256); ok {
		return b, err
	}
	var b []byte
	if err := t.q.QueryRowContext(ctx, qContent, id, version, sha256).Scan(&b); err != nil {
		return nil, notFound(err, fmt.Sprintf("artifact %s version %d content %s", id, version, sha256))
	}
	return b, nil
}

// labelClauses returns one EXISTS clause per label pair on the JSON column
// col, and their arguments; the SQL depends only on how many pairs there are.
func labelClauses(col string, labels map[string]string) (string, []any) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		b.WriteString(` AND EXISTS (SELECT 1 FROM json_each(` + col + `) j WHERE j.key = ? AND j.value = ?)`)
		args = append(args, k, labels[k])
	}
	return b.String(), args
}

// ListArtifacts' pieces. A list filtered by nothing but a name prefix (the
// common case) has a fixed text, qListArtifactsAll or qListArtifactsPrefix,
// so it is prepared once like the other fixed queries.
const (
	qListPrefix          = ` AND h.name >= ? AND substr(h.name, 1, length(?)) = ?`
	qListOrder           = ` ORDER BY h.name LIMIT +?`
	qListArtifactsAll    = qArtifactHead + `h.name > ?` + qListOrder
	qListArtifactsPrefix = qArtifactHead + `h.name > ?` + qListPrefix + qListOrder
)

func (t *readTx) ListArtifacts(ctx context.Context, f workspace.ArtifactFilter) ([]workspace.Artifact, error) {
	var b strings.Builder
	b.WriteString(qArtifactHead + `h.name > ?`)
	args := []any{f.After}
	if f.Kind != "" {
		b.WriteString(` AND h.kind = ?`)
		args = append(args, f.Kind)
	}
	if f.Owner != "" {
		b.WriteString(` AND h.owner = ?`)
		args = append(args, f.Owner)
	}
	if f.TaskID != "" {
		b.WriteString(` AND h.task_id = ?`)
		args = append(args, f.TaskID)
	}
	if f.NamePrefix != "" {
		// The range lets the name index narrow the scan; substr decides.
		b.WriteString(qListPrefix)
		args = append(args, f.NamePrefix, f.NamePrefix, f.NamePrefix)
	}
	lc, largs := labelClauses("v.labels", f.Labels)
	b.WriteString(lc)
	args = append(args, largs...)
	b.WriteString(qListOrder)
	args = append(args, limitArg(f.Limit))
	rows, err := t.q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list artifacts: %w", err)
	}
	return collectArtifacts(rows)
}

// limitArg maps "no limit" (0 or less) to SQLite's -1.
func limitArg(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func (t *writeTx) PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error {
	t.dropReadAhead(a.ID, a.Name, "")
	labels, err := jsonText(a.Labels, len(a.Labels) == 0)
	if err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, qBumpHead, a.Version, a.ID, a.Name, a.Kind, a.Owner, a.TaskID)
	if err != nil {
		return fmt.Errorf("sqlite: put artifact %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if _, err := t.q.ExecContext(ctx, qPutHead, a.ID, a.Name, a.Version, a.Kind, a.Owner, a.TaskID); err != nil {
			return fmt.Errorf("sqlite: put artifact %s: %w", a.ID, err)
		}
	}
	// The content's row: new bytes get one; nil content is stored already
	// (Store.PutArtifact's contract), under an earlier version.
	var blobID int64
	if content != nil {
		res, err := t.q.ExecContext(ctx, qPutBlob, a.ID, a.SHA256, content)
		if err != nil {
			return fmt.Errorf("sqlite: put artifact %s content: %w", a.ID, err)
		}
		if blobID, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("sqlite: put artifact %s content: %w", a.ID, err)
		}
	} else if err := t.q.QueryRowContext(ctx, qStoredBlob, a.ID, a.SHA256).Scan(&blobID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: put artifact %s version %d: no stored content with sha256 %s: %w",
				a.ID, a.Version, a.SHA256, workspace.ErrNotFound)
		}
		return fmt.Errorf("sqlite: put artifact %s content: %w", a.ID, err)
	}
	if _, err := t.q.ExecContext(ctx, qPutVersion, a.ID, a.Version, a.Name, a.Kind, a.Owner, a.ContentType,
		a.SHA256, a.Size, labels, a.TaskID, micros(a.CreatedAt), a.CreatedBy, micros(a.UpdatedAt), a.UpdatedBy, blobID); err != nil {
		return fmt.Errorf("sqlite: put artifact %s version %d: %w", a.ID, a.Version, err)
	}
	t.noted.put(a)
	return nil
}

func (t *writeTx) DeleteArtifact(ctx context.Context, id string) error {
	t.dropReadAhead(id, "", "")
	res, err := t.q.ExecContext(ctx, qDeleteArtifact, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete artifact %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("artifact %s: %w", id, workspace.ErrNotFound)
	}
	t.noted.deleted(id)
	return nil
}
