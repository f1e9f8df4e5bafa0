package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// querier is what a transaction's statements run on: one pool connection.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readTx implements driver.ReadTx inside a transaction begun by the store.
type readTx struct {
	q   querier // pl
	pl  *pipeline
	now time.Time
	// snapshot is set in a View, whose head and floor were read with its snapshot.
	snapshot    bool
	head, floor int64
	// viewed is the artifact a read-ahead view took, with its content.
	viewed *earlyRead
}

// writeTx adds the writes, which it queues on its pipeline.
type writeTx struct {
	readTx
	channel string
	// notify is whether another store listens: when none does, a commit
	// sends no NOTIFY (see registration).
	notify bool
	// seq is the event log's head: read after the writers' lock was taken
	// and moved by this transaction's appends only (see AppendEvents).
	seq int64
	// types and actors are those of the events it appended, kept only
	// while a writeHook is set.
	types, actors []string
	// savepoints is the depth of open savepoints (see savepoint.go).
	savepoints int
	// wrote are its writes of artifacts and leases, for the store's memo
	// (see predict.go); unsure is set when one may have been undone.
	wrote  []memoWrite
	unsure bool
}

func (t *readTx) Now() time.Time { return t.now }

// notFound maps pgx's no-rows to workspace.ErrNotFound and wraps the rest.
func notFound(what string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, workspace.ErrNotFound)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// labelsJSON encodes labels for a jsonb parameter; nil is the empty object.
// JSON goes as a string: every query exec mode, the simple protocol
// (poolers) included, sends a string as text that casts to jsonb.
func labelsJSON(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// likePrefix turns a name prefix into a LIKE pattern ("" for none).
func likePrefix(p string) string {
	if p == "" {
		return ""
	}
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// Artifacts.

const artifactCols = `id, name, kind, owner, version, content_type, sha256, size, labels, task_id, created_at, created_by, updated_at, updated_by`

const versionCols = `artifact_id, name, kind, owner, version, content_type, sha256, size, labels, task_id, created_at, created_by, updated_at, updated_by`

func scanArtifact(row pgx.Row) (workspace.Artifact, error) {
	var a workspace.Artifact
	err := row.Scan(&a.ID, &a.Name, &a.Kind, &a.Owner, &a.Version, &a.ContentType, &a.SHA256, &a.Size,
		&a.Labels, &a.TaskID, &a.CreatedAt, &a.CreatedBy, &a.UpdatedAt, &a.UpdatedBy)
	a.Labels = nilIfEmpty(a.Labels)
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return a, err
}

const (
	artifactByID   = `SELECT ` + artifactCols + ` FROM artifacts WHERE id = $1 AND NOT deleted`
	artifactByName = `SELECT ` + artifactCols + ` FROM artifacts WHERE name = $1 AND NOT deleted`
	artifactVer    = `SELECT ` + versionCols + ` FROM artifact_versions WHERE artifact_id = $1 AND version = $2`
	artifactVers   = `SELECT ` + versionCols + ` FROM artifact_versions WHERE artifact_id = $1 ORDER BY version`
	blobContent    = `SELECT content FROM blobs WHERE artifact_id = $1 AND sha256 = $2`
	// listArtifacts bounds a prefix's names on both sides ($8, $9), so the
	// walk of artifacts_live_name starts at the prefix (or the cursor) and
	// ends after it; the LIKE stays as the exact test.
	listArtifacts = `SELECT ` + artifactCols + ` FROM artifacts
		WHERE NOT deleted AND name > $1 AND name >= $8 AND ($9 = '' OR name < $9)
		  AND ($2 = '' OR kind = $2) AND ($3 = '' OR owner = $3)
		  AND ($4 = '' OR name LIKE $4) AND ($5 = '' OR task_id = $5)
		  AND labels @> $6::jsonb
		ORDER BY name LIMIT $7`
	// putArtifact writes the head, the version and (when given) the blob in one statement.
	putArtifact = `WITH head AS (
		INSERT INTO artifacts (` + artifactCols + `, deleted)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13, $14, false)
		ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, kind = EXCLUDED.kind, owner = EXCLUDED.owner,
			version = EXCLUDED.version, content_type = EXCLUDED.content_type, sha256 = EXCLUDED.sha256,
			size = EXCLUDED.size, labels = EXCLUDED.labels, task_id = EXCLUDED.task_id,
			created_at = EXCLUDED.created_at, created_by = EXCLUDED.created_by,
			updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by, deleted = false
	), ver AS (
		INSERT INTO artifact_versions (` + versionCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13, $14)
	)
	INSERT INTO blobs (artifact_id, sha256, content)
	SELECT $1::text, $7::text, $15::bytea WHERE $15::bytea IS NOT NULL
	ON CONFLICT DO NOTHING`
	deleteArtifact = `UPDATE artifacts SET deleted = true WHERE id = $1`
)

func (t *readTx) Artifact(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	var a workspace.Artifact
	scan := func(row pgx.Row) (err error) {
		a, err = scanArtifact(row)
		return err
	}
	if e := t.takeEarly(driver.ReadHint{Artifact: ref}); e != nil {
		if e.contentRead {
			t.viewed = e
		}
		if e.err != nil {
			return e.artifact, notFound("artifact", e.err)
		}
		return e.artifact, nil
	}
	r := artifactReadsHere.of(ref)
	err := t.readGuarded(ctx, r.sql, []any{r.arg}, scan, r.leaseSQL, r.leaseArg,
		func() string { return artifactLeaseName(ref, a, a.ID != "") })
	if err != nil {
		return a, notFound("artifact", err)
	}
	return a, nil
}

func (t *readTx) ArtifactVersion(ctx context.Context, id string, version int64) (workspace.Artifact, error) {
	a, err := scanArtifact(t.q.QueryRow(ctx, artifactVer, id, version))
	if err != nil {
		return a, notFound("artifact version", err)
	}
	return a, nil
}

func (t *readTx) ArtifactVersions(ctx context.Context, id string) ([]workspace.Artifact, error) {
	rows, err := t.q.Query(ctx, artifactVers, id)
	out, err := collect(rows, err, scanArtifact)
	if err != nil {
		return nil, fmt.Errorf("postgres: artifact versions: %w", err)
	}
	return out, nil
}

func (t *readTx) Content(ctx context.Context, id string, _ int64, sha256 string) ([]byte, error) {
	if e := t.viewed; e != nil && e.artifact.ID == id && e.artifact.SHA256 == sha256 {
		if e.content == nil {
			return nil, notFound("content", pgx.ErrNoRows)
		}
		return e.content, nil
	}
	var b []byte
	if err := t.q.QueryRow(ctx, blobContent, id, sha256).Scan(&b); err != nil {
		return nil, notFound("content", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (t *readTx) ListArtifacts(ctx context.Context, f workspace.ArtifactFilter) ([]workspace.Artifact, error) {
	// On tables without statistics the planner sorts every match rather
	// than walk the name index (29 ms for a page at 100k artifacts, 0.9 ms
	// walking): as for claims, sorts are off for this one query.
	_, _ = t.pl.Exec(ctx, sortsOff)
	rows, err := t.q.Query(ctx, listArtifacts, f.After, f.Kind, f.Owner, likePrefix(f.NamePrefix), f.TaskID,
		labelsJSON(f.Labels), f.Limit, f.NamePrefix, prefixEnd(f.NamePrefix))
	out, err := collect(rows, err, scanArtifact)
	if err != nil {
		return nil, fmt.Errorf("postgres: list artifacts: %w", err)
	}
	_, _ = t.pl.Exec(ctx, sortsBack)
	return out, nil
}

// prefixEnd is the least string above every string starting with p, in
// the "C" collation (UTF-8 byte order, which is code point order), or ""
// when there is none: p with its last code point incremented, after
// dropping trailing U+10FFFFs.
func prefixEnd(p string) string {
	rs := []rune(p)
	for len(rs) > 0 {
		r := rs[len(rs)-1]
		switch {
		case r >= utf8.MaxRune:
			rs = rs[:len(rs)-1]
			continue
		case r == 0xD7FF: // the surrogates are not code points of text
			rs[len(rs)-1] = 0xE000
		default:
			rs[len(rs)-1] = r + 1
		}
		return string(rs)
	}
	return ""
}

func (t *writeTx) PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error {
	t.pl.dropEarly(a.ID, a.Name, "")
	t.wrote = append(t.wrote, memoWrite{artifact: a})
	_, err := t.q.Exec(ctx, putArtifact, a.ID, a.Name, a.Kind, a.Owner, a.Version, a.ContentType, a.SHA256, a.Size,
		labelsJSON(a.Labels), a.TaskID, a.CreatedAt, a.CreatedBy, a.UpdatedAt, a.UpdatedBy, content)
	if err != nil {
		return fmt.Errorf("postgres: put artifact %s version %d: %w", a.ID, a.Version, err)
	}
	return nil
}

func (t *writeTx) DeleteArtifact(ctx context.Context, id string) error {
	t.pl.dropEarly(id, "", "")
	t.wrote = append(t.wrote, memoWrite{deleted: id})
	if _, err := t.q.Exec(ctx, deleteArtifact, id); err != nil {
		return fmt.Errorf("postgres: delete artifact %s: %w", id, err)
	}
	return nil
}

// Tasks.

const taskCols = `id, title, description, status, assignee, parent_id, depends_on, priority, labels, result, attempts, lease_expires_at, version, created_at, created_by, updated_at, updated_by, areas`

func scanTask(row pgx.Row) (workspace.Task, error) {
	var (
		t      workspace.Task
		status string
		lease  *time.Time
	)
	err := row.Scan(&t.ID, &t.Title, &t.Description, &status, &t.Assignee, &t.ParentID, &t.DependsOn, &t.Priority,
		&t.Labels, &t.Result, &t.Attempts, &lease, &t.Version, &t.CreatedAt, &t.CreatedBy, &t.UpdatedAt, &t.UpdatedBy, &t.Areas)
	t.Status = workspace.TaskStatus(status)
	t.Labels = nilIfEmpty(t.Labels)
	if len(t.DependsOn) == 0 {
		t.DependsOn = nil
	}
	if len(t.Areas) == 0 {
		t.Areas = nil
	}
	if lease != nil {
		t.LeaseExpiresAt = lease.UTC()
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, err
}

const (
	taskByID = `SELECT ` + taskCols + ` FROM tasks WHERE id = $1`
	// listReady is listTasks's query of the ready tasks (readyTask's test), for
	// ReadyLister: a walk of tasks_status (status, id) from $1 that stops
	// at the $5th ready task.
	listReady = `SELECT ` + taskCols + ` FROM tasks t
		WHERE t.status = 'pending' AND t.id > $1 AND ($2 = '' OR t.assignee = $2)
		  AND ($3 = '' OR t.parent_id = $3) AND t.labels @> $4::jsonb
		  AND NOT EXISTS (SELECT 1 FROM tasks d WHERE d.id = ANY (t.depends_on) AND d.status <> 'done')
		ORDER BY t.id LIMIT $5`
	// readyTask is the claim query: pending, every dependency done, best
	// first. It runs with sorts disabled (sortsOff, then sortsBack), which
	// leaves the planner one plan: the walk of tasks_ready in its order,
	// which stops at the first ready task. Otherwise, whenever the table's
	// statistics are missing or stale (a new workspace, a pool just loaded)
	// the planner estimates that few tasks are pending and match, and
	// chooses to fetch every pending task, check each one's dependencies
	// and sort them all, on every claim.
	readyTask = `SELECT ` + taskCols + ` FROM tasks t
		WHERE t.status = 'pending' AND ($1 = '' OR t.parent_id = $1) AND t.labels @> $2::jsonb
		  AND NOT EXISTS (SELECT 1 FROM tasks d WHERE d.id = ANY (t.depends_on) AND d.status <> 'done')
		ORDER BY t.priority DESC, t.id LIMIT 1`
	// sortsOff saves enable_sort and turns it off, for this transaction.
	// OFFSET 0 keeps the subquery, and so the saving, first.
	sortsOff = `SELECT set_config('enable_sort', 'off', true)
		FROM (SELECT set_config('agentspace.enable_sort', current_setting('enable_sort'), true) OFFSET 0) saved`
	// genericOn saves plan_cache_mode and asks for generic plans, for this
	// transaction: a statement of an array the planner sees the length of
	// costs less in a custom plan for a short one, so without it the
	// early reads of a small group would be planned again on every run
	// (~0.1 ms each), when their generic plan (a probe of an index per
	// element) is the right one for every length.
	genericOn = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)
		FROM (SELECT set_config('agentspace.plan_cache_mode', current_setting('plan_cache_mode'), true) OFFSET 0) saved`
	// genericBack restores what genericOn saved.
	genericBack = `SELECT set_config('plan_cache_mode', current_setting('agentspace.plan_cache_mode'), true)`
	// sortsBack restores what sortsOff saved.
	sortsBack     = `SELECT set_config('enable_sort', current_setting('agentspace.enable_sort'), true)`
	expiredClaims = `SELECT ` + taskCols + ` FROM tasks
		WHERE status = 'in_progress' AND lease_expires_at <= $1
		ORDER BY lease_expires_at, id LIMIT $2`
	// lapsedNow is expiredClaims by the statement's clock, for a claim's
	// read ahead: it runs after the transaction's clock was read, so it
	// finds every claim lapsed by then, and perhaps a few more (see
	// ExpiredClaims).
	lapsedNow = `SELECT ` + taskCols + ` FROM tasks
		WHERE status = 'in_progress' AND lease_expires_at <= clock_timestamp()
		ORDER BY lease_expires_at, id LIMIT $1`
	// deleteVersions removes versions of an artifact, then the content
	// rows whose hash no remaining version of it has. kept (the remaining
	// versions that share a removed one's hash) is read once, in one walk
	// of the artifact's versions: as a NOT EXISTS per content row, the
	// generic plan compared every content row of the artifact with every
	// version (an artifact of 7,474 versions: 2 s a batch of 18).
	// The CTE d's deletions are not visible to kept (one snapshot), hence
	// its own test of $2.
	deleteVersions = `WITH d AS (DELETE FROM artifact_versions WHERE artifact_id = $1 AND version = ANY ($2::bigint[]) RETURNING sha256),
		kept AS MATERIALIZED (SELECT v.sha256 FROM artifact_versions v WHERE v.artifact_id = $1
			AND NOT (v.version = ANY ($2::bigint[])) AND v.sha256 IN (SELECT sha256 FROM d))
		DELETE FROM blobs b WHERE b.artifact_id = $1 AND b.sha256 IN (SELECT sha256 FROM d)
			AND NOT EXISTS (SELECT 1 FROM kept WHERE kept.sha256 = b.sha256)`
	// deleteTask removes a task no other task depends on or has as
	// parent; tasks_depends_on (migration 000005) serves the first test.
	deleteTask = `WITH d AS (DELETE FROM tasks WHERE id = $1
			AND NOT EXISTS (SELECT 1 FROM tasks o WHERE o.depends_on @> ARRAY[$1::text COLLATE "C"])
			AND NOT EXISTS (SELECT 1 FROM tasks o WHERE o.parent_id = $1 AND o.parent_id <> '')
			RETURNING 1)
		SELECT count(*) FROM d`
	putTask = `INSERT INTO tasks (` + taskCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11, $12, $13, $14, $15, $16, $17, $18)
		ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, description = EXCLUDED.description,
			status = EXCLUDED.status, assignee = EXCLUDED.assignee, parent_id = EXCLUDED.parent_id,
			depends_on = EXCLUDED.depends_on, priority = EXCLUDED.priority, labels = EXCLUDED.labels,
			result = EXCLUDED.result, attempts = EXCLUDED.attempts, lease_expires_at = EXCLUDED.lease_expires_at,
			version = EXCLUDED.version, created_at = EXCLUDED.created_at, created_by = EXCLUDED.created_by,
			updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by, areas = EXCLUDED.areas`
)

func (t *readTx) Task(ctx context.Context, id string) (workspace.Task, error) {
	if e := t.takeEarly(driver.ReadHint{Task: id}); e != nil {
		if e.err != nil {
			return e.task, notFound("task", e.err)
		}
		return e.task, nil
	}
	var task workspace.Task
	err := t.readGuarded(ctx, taskByID, []any{id}, func(row pgx.Row) (err error) {
		task, err = scanTask(row)
		return err
	}, leaseByResource, driver.TaskResource(id), func() string { return driver.TaskResource(id) })
	if err != nil {
		return task, notFound("task", err)
	}
	return task, nil
}

// listTasks holds the list query for each status a TaskFilter may name
// ("" for none) and each combination of its other optional filters (bit
// 0 assignee, bit 1 parent), naming only the filters it tests, with the
// status written into the text. Prepared statements run on a generic plan
// after five runs, and a generic plan cannot know the status: with one
// text for every filter ("($2 = ” OR status = $2)", or "status = $2")
// PostgreSQL settled on walking the whole primary key for a status no
// task had (2.4-2.7 ms at 10,000 tasks against 0.01 ms by tasks_status,
// EXPLAIN ANALYZE), and the dashboard's board asks for three such
// statuses: it took twice as long at 10,000 tasks as at 1,000. With the
// status in the text, the generic plan is planned for it. Only the six
// statuses are ever written in; a filter's status is one of them (the
// engine refuses others before a read), and any other would run the
// query with the status as a parameter.
var (
	listTasks = func() map[workspace.TaskStatus]*[4]string {
		qs := map[workspace.TaskStatus]*[4]string{"": listTaskTexts("", 2)}
		for _, st := range []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked,
			workspace.TaskDone, workspace.TaskFailed, workspace.TaskCancelled} {
			qs[st] = listTaskTexts(` AND status = '`+string(st)+`'`, 2)
		}
		return qs
	}()
	// listTasksByParam are the texts that take the status as a parameter.
	listTasksByParam = listTaskTexts(` AND status = $2`, 3)
)

// listTaskTexts are the list query's texts with status, a condition on
// the status ("" for none) that takes the parameters before next, for
// each combination of the other optional filters (bit 0 assignee, bit 1
// parent).
func listTaskTexts(status string, next int) *[4]string {
	texts := new([4]string)
	for v := range texts {
		var b strings.Builder
		b.WriteString(`SELECT ` + taskCols + ` FROM tasks WHERE id > $1` + status)
		n := next
		for i, col := range []string{"assignee", "parent_id"} {
			if v&(1<<i) != 0 {
				fmt.Fprintf(&b, ` AND %s = $%d`, col, n)
				n++
			}
		}
		fmt.Fprintf(&b, ` AND labels @> $%d::jsonb ORDER BY id LIMIT $%d`, n, n+1)
		texts[v] = b.String()
	}
	return texts
}

func (t *readTx) ListTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error) {
	args := make([]any, 1, 6)
	args[0] = f.After
	texts, ok := listTasks[f.Status]
	if !ok {
		texts = listTasksByParam
		args = append(args, string(f.Status))
	}
	v := 0
	for i, val := range []string{f.Assignee, f.ParentID} {
		if val != "" {
			v |= 1 << i
			args = append(args, val)
		}
	}
	args = append(args, labelsJSON(f.Labels), f.Limit)
	rows, err := t.q.Query(ctx, texts[v], args...)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tasks: %w", err)
	}
	return out, nil
}

// ListReadyTasks is ListTasks of the pending tasks whose every dependency
// is done, in ID order, at most f.Limit.
// It runs with sorts disabled, as readyTask does and for the same reason:
// on a table without statistics the planner would otherwise read every
// pending task, check each one's dependencies and sort them (195 ms at
// 10,000 tasks, against 0.1 ms for the walk of tasks_status).
func (t *readTx) ListReadyTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error) {
	_, _ = t.pl.Exec(ctx, sortsOff)
	rows, err := t.q.Query(ctx, listReady, f.After, f.Assignee, f.ParentID, labelsJSON(f.Labels), f.Limit)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		// The transaction is aborted: queue nothing more.
		return nil, fmt.Errorf("postgres: list ready tasks: %w", err)
	}
	_, _ = t.pl.Exec(ctx, sortsBack)
	return out, nil
}

func (t *readTx) ReadyTask(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	if e := t.takeClaim(r); e != nil {
		if e.err != nil {
			return e.task, notFound("ready task", e.err)
		}
		return e.task, nil
	}
	// Queued: they go in the read's round trip, or the next one.
	_, _ = t.pl.Exec(ctx, sortsOff)
	task, err := scanTask(t.q.QueryRow(ctx, readyTask, r.ParentID, labelsJSON(r.Labels)))
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		// The transaction is aborted (or its savepoint is rolled back,
		// which undoes sortsOff as well): queue nothing more.
		return task, notFound("ready task", err)
	}
	_, _ = t.pl.Exec(ctx, sortsBack)
	if err != nil {
		return task, notFound("ready task", err)
	}
	return task, nil
}

func (t *readTx) ExpiredClaims(ctx context.Context, now time.Time, limit int) ([]workspace.Task, error) {
	if e := t.earlyClaim(); e != nil && !e.expiredTaken && limit <= earlyLapsed {
		e.expiredTaken = true
		// They were read by a clock no earlier than now, ordered by
		// expiry: those lapsed by now are a prefix of them, and the first
		// limit of the lapsed claims whether or not earlyLapsed cut the
		// read short.
		kept := slices.DeleteFunc(slices.Clone(e.expired), func(task workspace.Task) bool { return task.LeaseExpiresAt.After(now) })
		return kept[:min(limit, len(kept))], nil
	}
	rows, err := t.q.Query(ctx, expiredClaims, now, limit)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("postgres: expired claims: %w", err)
	}
	return out, nil
}

func (t *writeTx) PutTask(ctx context.Context, task workspace.Task) error {
	deps, areas := task.DependsOn, task.Areas
	if deps == nil {
		deps = []string{}
	}
	if areas == nil {
		areas = []string{}
	}
	result, err := json.Marshal(task.Result)
	if err != nil {
		return fmt.Errorf("postgres: put task %s: %w", task.ID, err)
	}
	var lease *time.Time
	if !task.LeaseExpiresAt.IsZero() {
		lease = &task.LeaseExpiresAt
	}
	t.pl.dropEarlyHint(driver.ReadHint{Task: task.ID})
	_, err = t.q.Exec(ctx, putTask, task.ID, task.Title, task.Description, string(task.Status), task.Assignee,
		task.ParentID, deps, task.Priority, labelsJSON(task.Labels), string(result), task.Attempts, lease,
		task.Version, task.CreatedAt, task.CreatedBy, task.UpdatedAt, task.UpdatedBy, areas)
	if err != nil {
		return fmt.Errorf("postgres: put task %s: %w", task.ID, err)
	}
	return nil
}

// Notes.

const noteCols = `kind, key, title, body, author, version, created_at, updated_at, updated_by`

func scanNote(row pgx.Row) (workspace.Note, error) {
	var n workspace.Note
	err := row.Scan(&n.Kind, &n.Key, &n.Title, &n.Body, &n.Author, &n.Version, &n.CreatedAt, &n.UpdatedAt, &n.UpdatedBy)
	n.CreatedAt, n.UpdatedAt = n.CreatedAt.UTC(), n.UpdatedAt.UTC()
	return n, err
}

const (
	noteByKey = `SELECT ` + noteCols + ` FROM notes WHERE kind = $1 AND key = $2`
	listNotes = `SELECT ` + noteCols + ` FROM notes
		WHERE ($1 = '' OR kind = $1) AND (kind, key) > ($2, $3)
		ORDER BY kind, key LIMIT $4`
	// A list of one kind reads only that kind's rows (see ListNotes), and
	// one with an end stops there: both bounds are the index's.
	listKind = `SELECT ` + noteCols + ` FROM notes
		WHERE kind = $1 AND key > $2
		ORDER BY kind, key LIMIT $3`
	listKindRange = `SELECT ` + noteCols + ` FROM notes
		WHERE kind = $1 AND key > $2 AND key < $4
		ORDER BY kind, key LIMIT $3`
	putNote = `INSERT INTO notes (` + noteCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (kind, key) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body,
			author = EXCLUDED.author, version = EXCLUDED.version, created_at = EXCLUDED.created_at,
			updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`
	deleteNote = `DELETE FROM notes WHERE kind = $1 AND key = $2`
)

func (t *readTx) Note(ctx context.Context, kind, key string) (workspace.Note, error) {
	if e := t.takeEarly(driver.ReadHint{NoteKind: kind, NoteKey: key}); e != nil {
		if e.err != nil {
			return e.note, notFound("note", e.err)
		}
		return e.note, nil
	}
	var n workspace.Note
	err := t.readGuarded(ctx, noteByKey, []any{kind, key}, func(row pgx.Row) (err error) {
		n, err = scanNote(row)
		return err
	}, leaseByResource, noteResource(kind, key), func() string { return noteResource(kind, key) })
	if err != nil {
		return n, notFound("note", err)
	}
	return n, nil
}

func (t *readTx) ListNotes(ctx context.Context, q driver.NoteQuery) ([]workspace.Note, error) {
	query, args := listNotes, []any{q.Kind, q.AfterKind, q.AfterKey, q.Limit}
	if q.Kind != "" {
		// A walk of one kind never reads another's rows: the row value
		// alone would go on through the kinds after it.
		after, _, past := q.KindStart()
		if past {
			return nil, nil
		}
		query, args = listKind, []any{q.Kind, after, q.Limit}
		if q.BeforeKey != "" {
			query, args = listKindRange, []any{q.Kind, after, q.Limit, q.BeforeKey}
		}
	}
	rows, err := t.q.Query(ctx, query, args...)
	out, err := collect(rows, err, scanNote)
	if err != nil {
		return nil, fmt.Errorf("postgres: list notes: %w", err)
	}
	return out, nil
}

func (t *writeTx) PutNote(ctx context.Context, n workspace.Note) error {
	t.pl.dropEarlyHint(driver.ReadHint{NoteKind: n.Kind, NoteKey: n.Key})
	_, err := t.q.Exec(ctx, putNote, n.Kind, n.Key, n.Title, n.Body, n.Author, n.Version, n.CreatedAt, n.UpdatedAt, n.UpdatedBy)
	if err != nil {
		return fmt.Errorf("postgres: put note %s/%s: %w", n.Kind, n.Key, err)
	}
	return nil
}

func (t *writeTx) DeleteNote(ctx context.Context, kind, key string) error {
	t.pl.dropEarlyHint(driver.ReadHint{NoteKind: kind, NoteKey: key})
	if _, err := t.q.Exec(ctx, deleteNote, kind, key); err != nil {
		return fmt.Errorf("postgres: delete note %s/%s: %w", kind, key, err)
	}
	return nil
}

// Leases.

// Lease read-ahead. Every write checks the lock that guards the record it
// has just read (the engine's checkGuard), so in a write transaction the
// record's read also reads that lease row, in the same round trip, and the
// Lease call that follows is answered from it unless a statement was queued
// in between (workspace.ArtifactResource and driver.TaskResource name them).
func noteResource(kind, key string) string {
	return "note:" + kind + "/" + key
}

// readGuarded reads a record's row with scan; in a write transaction the
// lease leaseSQL finds (given leaseArg) comes in the same round trip and is
// kept for Lease(resource()), resource() being called once the record was
// read ("" if the lease row cannot be named).
func (t *readTx) readGuarded(ctx context.Context, sql string, args []any, scan func(pgx.Row) error,
	leaseSQL, leaseArg string, resource func() string) error {
	if t.snapshot {
		return scan(t.q.QueryRow(ctx, sql, args...))
	}
	var (
		scanErr error
		ahead   leaseAhead
	)
	err := t.pl.read(ctx,
		rowQuery{sql: sql, args: args, scan: func(row pgx.Row) error {
			scanErr = scan(row)
			return exceptNoRows(scanErr)
		}},
		rowQuery{sql: leaseSQL, args: []any{leaseArg}, scan: func(row pgx.Row) error {
			ahead.lease, ahead.err = scanLease(row)
			return exceptNoRows(ahead.err)
		}})
	if err != nil {
		return err
	}
	if ahead.resource = resource(); ahead.resource != "" {
		t.pl.ahead = &ahead
	}
	return scanErr
}

// takeEarly returns the record read ahead for h, once, if there is one,
// and keeps its lease for the Lease call that follows.
func (t *readTx) takeEarly(h driver.ReadHint) *earlyRead {
	if t.pl == nil || t.snapshot {
		return nil
	}
	i := slices.IndexFunc(t.pl.early, func(e *earlyRead) bool { return e.hint == h })
	if i < 0 {
		return nil
	}
	e := t.pl.early[i]
	t.pl.early = slices.Delete(t.pl.early, i, i+1)
	if e.lease.resource != "" {
		t.pl.ahead = &e.lease
	}
	return e
}

// viewReads are ViewHinted's statements: the statement's clock, the
// artifact, and its head's content (NULL when its blob is missing).
type viewReads struct{ byName, byID, note, task, lease string }

func newViewReads(schema string) viewReads {
	head := `SELECT clock_timestamp(), ` + artifactCols + `, (SELECT b.content FROM blobs b
		WHERE b.artifact_id = h.id AND b.sha256 = h.sha256) FROM artifacts h WHERE NOT deleted AND `
	return viewReads{
		note:   qualify(schema, `SELECT clock_timestamp(), `+noteCols+` FROM notes WHERE kind = $1 AND key = $2`),
		task:   qualify(schema, `SELECT clock_timestamp(), `+taskCols+` FROM tasks WHERE id = $1`),
		lease:  qualify(schema, `SELECT clock_timestamp(), `+leaseCols+` FROM leases WHERE resource = $1`),
		byName: qualify(schema, head+`name = $1`),
		byID:   qualify(schema, head+`id = $1`),
	}
}

// earlyLapsed is how many lapsed claims a claim's read ahead fetches: what
// the engine asks ExpiredClaims for.
const earlyLapsed = 100

// earlyClaim returns the claim's reads ahead, if the transaction has them
// and no task was written since they were read.
func (t *readTx) earlyClaim() *earlyRead {
	if t.pl == nil || t.snapshot {
		return nil
	}
	i := slices.IndexFunc(t.pl.early, func(e *earlyRead) bool { return e.hint.Claim != nil })
	if i < 0 {
		return nil
	}
	return t.pl.early[i]
}

// takeClaim returns, once, the claim's reads ahead if they are of a claim
// like r, after its lapsed claims were asked for.
func (t *readTx) takeClaim(r workspace.ClaimRequest) *earlyRead {
	e := t.earlyClaim()
	if e == nil || !e.expiredTaken || !sameClaim(*e.hint.Claim, r) {
		return nil
	}
	t.pl.early = slices.DeleteFunc(t.pl.early, func(x *earlyRead) bool { return x == e })
	return e
}

// sameClaim reports whether a and b ask for the same ready task.
func sameClaim(a, b workspace.ClaimRequest) bool {
	return a.ParentID == b.ParentID && maps.Equal(a.Labels, b.Labels)
}

// artifactReads are Artifact's reads of an artifact and of its lease.
type artifactReads struct {
	byName, byID, lease, leaseOfArtifact string
}

// artifactReadsHere name their tables as the search_path finds them.
var artifactReadsHere = artifactReads{
	byName: artifactByName, byID: artifactByID, lease: leaseByResource, leaseOfArtifact: leaseOfArtifact,
}

// earlyReads are the reads of hinted records: an artifact's (as Artifact
// reads it), a note's, a task's, a lease's and a claim's, with their tables
// named in their schema:
// a hinted transaction queues them in the batch that sets the search_path,
// and a batch is prepared before it runs.
type earlyReads struct {
	artifactReads
	note, task, lapsed, ready string
	// A group's artifacts, in one statement per kind (see queueArtifacts).
	artifactsByID, artifactsByName, leases, leasesOfArtifacts string
}

// unqualified finds a table named without its schema after FROM.
var unqualified = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\bFROM\s+(artifacts|blobs|leases|notes|tasks|listeners|counters)\b`)
})

// qualify is sql with the tables it reads FROM named in schema, for a
// statement prepared before the search_path is set (a batch's new
// statements are parsed before any of it runs).
func qualify(schema, sql string) string {
	return unqualified().ReplaceAllStringFunc(sql, func(m string) string {
		return "FROM " + pgx.Identifier{schema, unqualified().FindStringSubmatch(m)[1]}.Sanitize()
	})
}

func newEarlyReads(schema string) earlyReads {
	r := artifactReadsHere
	return earlyReads{
		artifactReads: artifactReads{byName: qualify(schema, r.byName), byID: qualify(schema, r.byID),
			lease: qualify(schema, r.lease), leaseOfArtifact: qualify(schema, r.leaseOfArtifact)},
		note: qualify(schema, noteByKey), task: qualify(schema, taskByID),
		lapsed: qualify(schema, lapsedNow), ready: qualify(schema, readyTask),
		artifactsByID: qualify(schema, earlyArtifactsByID), artifactsByName: qualify(schema, earlyArtifactsByName),
		leases: qualify(schema, earlyLeases), leasesOfArtifacts: qualify(schema, earlyLeasesOfArtifacts),
	}
}

// artifactRead is one artifact's read: its row's query and its lease's.
type artifactRead struct{ sql, arg, leaseSQL, leaseArg string }

// of returns the reads of the artifact ref names, by ID or by name.
func (r artifactReads) of(ref workspace.ArtifactRef) artifactRead {
	if ref.ID != "" {
		return artifactRead{r.byID, ref.ID, r.leaseOfArtifact, ref.ID}
	}
	return artifactRead{r.byName, ref.Name, r.lease, workspace.ArtifactResource(ref.Name)}
}

// artifactLeaseName names the lease read with the artifact ref names, as
// the engine names it: by the name, or by the name of the artifact found
// by ID ("" when none was found: nothing to name).
func artifactLeaseName(ref workspace.ArtifactRef, a workspace.Artifact, found bool) string {
	switch {
	case ref.ID == "":
		return workspace.ArtifactResource(ref.Name)
	case found:
		return workspace.ArtifactResource(a.Name)
	}
	return ""
}

// queueAll queues on b the reads of every hint, and returns where their
// outcomes will be kept. Several artifacts are read together
// (queueArtifacts): a group of writers of artifacts hints one each. Only
// the first claim is read ahead: whichever claim comes first writes a
// task, which makes every other claim's reads stale.
func (r earlyReads) queueAll(b *pgx.Batch, hints []driver.ReadHint) []*earlyRead {
	var (
		early  []*earlyRead
		arts   []driver.ReadHint
		claims int
	)
	for _, h := range hints {
		switch {
		case h.Artifact != (workspace.ArtifactRef{}):
			arts = append(arts, h)
			continue
		case h.Claim != nil:
			if claims++; claims > 1 {
				continue
			}
		}
		if e := r.queue(b, h); e != nil {
			early = append(early, e)
		}
	}
	switch len(arts) {
	case 0:
	case 1:
		early = append(early, r.queue(b, arts[0]))
	default:
		early = append(early, r.queueArtifacts(b, arts)...)
	}
	return early
}

// queue queues on b the reads h names, as the transaction's own reads
// would do them, and returns where their outcome will be kept (nil for a
// hint it does not read ahead).
func (r earlyReads) queue(b *pgx.Batch, h driver.ReadHint) *earlyRead {
	e := &earlyRead{hint: h}
	// The lease that guards the record (for a lease hint, the lease
	// itself), read after it.
	var leaseSQL, leaseArg string
	switch {
	case h.Artifact != (workspace.ArtifactRef{}):
		rd := r.of(h.Artifact)
		b.Queue(rd.sql, rd.arg).QueryRow(func(row pgx.Row) error {
			e.artifact, e.err = scanArtifact(row)
			return exceptNoRows(e.err)
		})
		leaseSQL, leaseArg = rd.leaseSQL, rd.leaseArg
	case h.NoteKind != "" || h.NoteKey != "":
		b.Queue(r.note, h.NoteKind, h.NoteKey).QueryRow(func(row pgx.Row) error {
			e.note, e.err = scanNote(row)
			return exceptNoRows(e.err)
		})
		leaseSQL, leaseArg = r.lease, noteResource(h.NoteKind, h.NoteKey)
	case h.Task != "":
		b.Queue(r.task, h.Task).QueryRow(func(row pgx.Row) error {
			e.task, e.err = scanTask(row)
			return exceptNoRows(e.err)
		})
		leaseSQL, leaseArg = r.lease, driver.TaskResource(h.Task)
	case h.Lease != "":
		leaseSQL, leaseArg = r.lease, h.Lease
	case h.Claim != nil:
		b.Queue(r.lapsed, earlyLapsed).Query(func(rows pgx.Rows) error {
			var err error
			e.expired, err = collect(rows, nil, scanTask)
			return err
		})
		b.Queue(sortsOff)
		b.Queue(r.ready, h.Claim.ParentID, labelsJSON(h.Claim.Labels)).QueryRow(func(row pgx.Row) error {
			e.task, e.err = scanTask(row)
			return exceptNoRows(e.err)
		})
		b.Queue(sortsBack)
		return e
	default:
		return nil
	}
	b.Queue(leaseSQL, leaseArg).QueryRow(func(row pgx.Row) error {
		e.lease.lease, e.lease.err = scanLease(row)
		if err := exceptNoRows(e.lease.err); err != nil {
			return err
		}
		e.lease.resource = leaseArg
		if h.Artifact != (workspace.ArtifactRef{}) {
			// Named as the engine names it: by the artifact's name.
			e.lease.resource = artifactLeaseName(h.Artifact, e.artifact, e.err == nil)
		}
		return nil
	})
	return e
}

// queueArtifacts queues on b the reads of several hinted artifacts and
// their leases, as queue would read each, in one statement for those hinted
// by ID, one for those hinted by name, and one for each kind's leases
// (2n statements become at most 4), and returns where their outcomes
// will be kept, in the order of hints.
func (r earlyReads) queueArtifacts(b *pgx.Batch, hints []driver.ReadHint) []*earlyRead {
	var (
		out              = make([]*earlyRead, len(hints))
		byID, byName     []*earlyRead
		ids, names, ress []string
	)
	for i, h := range hints {
		// What is not found stays so: no row, as queue's reads say.
		e := &earlyRead{hint: h, err: pgx.ErrNoRows, lease: leaseAhead{err: pgx.ErrNoRows}}
		out[i] = e
		if h.Artifact.ID != "" {
			byID, ids = append(byID, e), append(ids, h.Artifact.ID)
			continue
		}
		e.lease.resource = workspace.ArtifactResource(h.Artifact.Name)
		byName, names, ress = append(byName, e), append(names, h.Artifact.Name), append(ress, e.lease.resource)
	}
	artifacts := func(es []*earlyRead) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			if err := eachNumbered(rows, scanArtifact, func(n int64, a workspace.Artifact) {
				es[n-1].artifact, es[n-1].err = a, nil
			}); err != nil {
				return err
			}
			for _, e := range es {
				// Named as the engine names it: by the name asked for, or
				// by the name of the artifact found by ID.
				e.lease.resource = artifactLeaseName(e.hint.Artifact, e.artifact, e.err == nil)
			}
			return nil
		}
	}
	leases := func(es []*earlyRead) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			return eachNumbered(rows, scanLease, func(n int64, l workspace.Lease) {
				es[n-1].lease.lease, es[n-1].lease.err = l, nil
			})
		}
	}
	b.Queue(genericOn)
	defer b.Queue(genericBack)
	if len(byID) > 0 {
		b.Queue(r.artifactsByID, ids).Query(artifacts(byID))
		b.Queue(r.leasesOfArtifacts, ids).Query(leases(byID))
	}
	if len(byName) > 0 {
		b.Queue(r.artifactsByName, names).Query(artifacts(byName))
		b.Queue(r.leases, ress).Query(leases(byName))
	}
	return out
}

// eachNumbered scans with scan each of rows, whose last column is the
// row's place in the statement's list (from 1), and hands both to set.
func eachNumbered[T any](rows pgx.Rows, scan func(pgx.Row) (T, error), set func(n int64, v T)) error {
	for rows.Next() {
		var n int64
		v, err := scan(framedRow{Row: rows, after: []any{&n}})
		if err != nil {
			return err
		}
		set(n, v)
	}
	return rows.Err()
}

// exceptNoRows is err unless it says that there was no row.
func exceptNoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

const leaseCols = `resource, owner, token, acquired_at, expires_at, ttl`

func scanLease(row pgx.Row) (workspace.Lease, error) {
	var (
		l   workspace.Lease
		ttl int64
	)
	err := row.Scan(&l.Resource, &l.Owner, &l.Token, &l.AcquiredAt, &l.ExpiresAt, &ttl)
	l.AcquiredAt, l.ExpiresAt, l.TTL = l.AcquiredAt.UTC(), l.ExpiresAt.UTC(), time.Duration(ttl)
	return l, err
}

const (
	leaseByResource = `SELECT ` + leaseCols + ` FROM leases WHERE resource = $1`
	// The reads of a group's hinted artifacts and their leases, one
	// statement for all the hints of a kind: $1 lists their IDs, names or
	// lease names, and each row found ends with its place in the list
	// (from 1). LIMIT 1 keeps each lookup a probe of its index, whatever
	// the planner thinks of the list's length.
	earlyArtifactsByID = `SELECT a.*, h.n FROM unnest($1::text[]) WITH ORDINALITY AS h(id, n),
		LATERAL (SELECT ` + artifactCols + ` FROM artifacts WHERE id = h.id AND NOT deleted LIMIT 1) a`
	earlyArtifactsByName = `SELECT a.*, h.n FROM unnest($1::text[]) WITH ORDINALITY AS h(name, n),
		LATERAL (SELECT ` + artifactCols + ` FROM artifacts WHERE name = h.name AND NOT deleted LIMIT 1) a`
	earlyLeases = `SELECT l.*, h.n FROM unnest($1::text[]) WITH ORDINALITY AS h(resource, n),
		LATERAL (SELECT ` + leaseCols + ` FROM leases WHERE resource = h.resource LIMIT 1) l`
	earlyLeasesOfArtifacts = `SELECT l.*, h.n FROM unnest($1::text[]) WITH ORDINALITY AS h(id, n),
		LATERAL (SELECT ` + leaseCols + ` FROM leases
			WHERE resource = (SELECT 'artifact:' || name FROM artifacts WHERE id = h.id AND NOT deleted) LIMIT 1) l`
	leaseOfArtifact = `SELECT ` + leaseCols + ` FROM leases
		WHERE resource = (SELECT 'artifact:' || name FROM artifacts WHERE id = $1 AND NOT deleted)`
	liveLeases = `SELECT ` + leaseCols + ` FROM leases WHERE owner <> '' AND expires_at > $1 ORDER BY resource`
	leaseRows  = `SELECT ` + leaseCols + ` FROM leases WHERE resource > $1 ORDER BY resource LIMIT $2`
	// artifactIDs pages through every artifact, live and deleted (the
	// columns are COLLATE "C": bytewise).
	artifactIDs = `SELECT id FROM artifacts WHERE id > $1 ORDER BY id LIMIT $2`
	putLease    = `INSERT INTO leases (` + leaseCols + `) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (resource) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token,
			acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at, ttl = EXCLUDED.ttl`
)

func (t *readTx) Lease(ctx context.Context, resource string) (workspace.Lease, error) {
	t.takeEarly(driver.ReadHint{Lease: resource}) // a lease read ahead on its own is kept as ahead
	if a := t.pl.ahead; a != nil && a.resource == resource {
		t.pl.ahead = nil
		if a.err != nil {
			return a.lease, notFound("lease", a.err)
		}
		return a.lease, nil
	}
	l, err := scanLease(t.q.QueryRow(ctx, leaseByResource, resource))
	if err != nil {
		return l, notFound("lease", err)
	}
	return l, nil
}

func (t *readTx) ListLeases(ctx context.Context, now time.Time) ([]workspace.Lease, error) {
	rows, err := t.q.Query(ctx, liveLeases, now)
	out, err := collect(rows, err, scanLease)
	if err != nil {
		return nil, fmt.Errorf("postgres: list leases: %w", err)
	}
	return out, nil
}

// LeaseRows implements driver.ReadTx.
func (t *readTx) LeaseRows(ctx context.Context, after string, limit int) ([]workspace.Lease, error) {
	rows, err := t.q.Query(ctx, leaseRows, after, limit)
	out, err := collect(rows, err, scanLease)
	if err != nil {
		return nil, fmt.Errorf("postgres: lease rows: %w", err)
	}
	return out, nil
}

// The store lists deleted artifacts and released leases for an export
// and gc (driver.ReadTx's ArtifactIDs and LeaseRows).
var (
	_ driver.ReadTx      = (*readTx)(nil)
	_ driver.ReadyLister = (*readTx)(nil)
)

// ArtifactIDs implements driver.ReadTx.
func (t *readTx) ArtifactIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := t.q.Query(ctx, artifactIDs, after, limit)
	out, err := collect(rows, err, func(r pgx.Row) (string, error) {
		var id string
		err := r.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: artifact ids: %w", err)
	}
	return out, nil
}

func (t *writeTx) PutLease(ctx context.Context, l workspace.Lease) error {
	t.pl.dropEarly("", "", l.Resource)
	t.wrote = append(t.wrote, memoWrite{lease: &l})
	if _, err := t.q.Exec(ctx, putLease, l.Resource, l.Owner, l.Token, l.AcquiredAt, l.ExpiresAt, int64(l.TTL)); err != nil {
		return fmt.Errorf("postgres: put lease %q: %w", l.Resource, err)
	}
	return nil
}

// Idempotency keys and counts.

const (
	idempotent      = `SELECT result FROM idempotency WHERE key = $1 AND expires_at > $2`
	putIdempotent   = `INSERT INTO idempotency (key, result, expires_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET result = EXCLUDED.result, expires_at = EXCLUDED.expires_at`
	pruneIdempotent = `DELETE FROM idempotency WHERE expires_at < $1`
	counts          = `SELECT
		(SELECT count(*) FROM artifacts WHERE NOT deleted),
		(SELECT count(*) FROM notes),
		(SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n FROM tasks GROUP BY status) s)`
)

func (t *readTx) Idempotent(ctx context.Context, key string, now time.Time) ([]byte, error) {
	var b []byte
	if err := t.q.QueryRow(ctx, idempotent, key, now).Scan(&b); err != nil {
		return nil, notFound("idempotency key", err)
	}
	return b, nil
}

func (t *writeTx) PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error {
	if _, err := t.q.Exec(ctx, putIdempotent, key, result, expires); err != nil {
		return fmt.Errorf("postgres: put idempotency key: %w", err)
	}
	return nil
}

func (t *writeTx) PruneIdempotent(ctx context.Context, now time.Time) error {
	if _, err := t.q.Exec(ctx, pruneIdempotent, now); err != nil {
		return fmt.Errorf("postgres: prune idempotency keys: %w", err)
	}
	return nil
}

func (t *readTx) Counts(ctx context.Context) (driver.Counts, error) {
	var (
		c     driver.Counts
		tasks map[string]int
	)
	if err := t.q.QueryRow(ctx, counts).Scan(&c.Artifacts, &c.Notes, &tasks); err != nil {
		return c, fmt.Errorf("postgres: counts: %w", err)
	}
	c.Tasks = make(map[workspace.TaskStatus]int, len(tasks))
	for s, n := range tasks {
		c.Tasks[workspace.TaskStatus(s)] = n
	}
	return c, nil
}

// DeleteTask implements driver.Tx.
func (t *writeTx) DeleteTask(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := t.q.QueryRow(ctx, deleteTask, id).Scan(&n); err != nil {
		return false, fmt.Errorf("postgres: delete task %s: %w", id, err)
	}
	return n > 0, nil
}

// DeleteVersions implements driver.Tx.
func (t *writeTx) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	if _, err := t.q.Exec(ctx, deleteVersions, id, versions); err != nil {
		return fmt.Errorf("postgres: delete versions of %s: %w", id, err)
	}
	return nil
}
