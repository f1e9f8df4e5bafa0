package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

const taskCols = `t.id, t.title, t.description, t.status, t.assignee, t.parent_id, t.depends_on,
	t.priority, t.labels, t.result, t.attempts, t.lease_expires_at, t.version,
	t.created_at, t.created_by, t.updated_at, t.updated_by, t.areas`

const (
	qTask    = `SELECT ` + taskCols + ` FROM tasks t WHERE t.id = ?`
	qPutTask = `INSERT INTO tasks (id, title, description, status, assignee, parent_id, depends_on,
		priority, labels, result, attempts, lease_expires_at, version, created_at, created_by, updated_at, updated_by, areas)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET title = excluded.title, description = excluded.description,
		status = excluded.status, assignee = excluded.assignee, parent_id = excluded.parent_id,
		depends_on = excluded.depends_on, priority = excluded.priority, labels = excluded.labels,
		result = excluded.result, attempts = excluded.attempts, lease_expires_at = excluded.lease_expires_at,
		version = excluded.version, created_at = excluded.created_at, created_by = excluded.created_by,
		updated_at = excluded.updated_at, updated_by = excluded.updated_by, areas = excluded.areas`
	qPutDep = `INSERT OR IGNORE INTO task_deps (task_id, dep_id) VALUES (?, ?)`
	// qTaskNamed: whether a task depends on the task or has it as parent.
	qTaskNamed = `SELECT EXISTS (SELECT 1 FROM task_deps WHERE dep_id = ?1)
		OR EXISTS (SELECT 1 FROM tasks WHERE parent_id = ?1 AND parent_id <> '')`
	qDeleteTaskDeps = `DELETE FROM task_deps WHERE task_id = ?`
	qDeleteTask     = `DELETE FROM tasks WHERE id = ?`
	// qReadyTask picks the best claimable task in one statement: pending,
	// no dependency that is not done, highest priority then oldest id (the
	// tasks_ready index gives that order).
	qReadyTask = `SELECT ` + taskCols + ` FROM tasks t
		WHERE t.status = 'pending'` + qNotWaiting
	// qNotWaiting holds back a task with a dependency not done (or gone).
	qNotWaiting = `
		AND NOT EXISTS (SELECT 1 FROM task_deps d LEFT JOIN tasks dt ON dt.id = d.dep_id
			WHERE d.task_id = t.id AND (dt.status IS NULL OR dt.status <> 'done'))`
	qReadyTaskOrder = ` ORDER BY t.priority DESC, t.id LIMIT 1`
	qReadyTaskAny   = qReadyTask + qReadyTaskOrder
	qExpiredClaims  = `SELECT ` + taskCols + ` FROM tasks t
		WHERE t.status = 'in_progress' AND t.lease_expires_at <= ?
		ORDER BY t.lease_expires_at LIMIT +?`
	qCounts = `SELECT
		(SELECT count(*) FROM artifacts WHERE deleted = 0),
		(SELECT count(*) FROM notes)`
	qTaskCounts = `SELECT status, count(*) FROM tasks GROUP BY status`
)

func scanTask(sc scanner) (workspace.Task, error) {
	var (
		t                    workspace.Task
		deps, labels, result sql.NullString
		areas                sql.NullString
		lease                sql.NullInt64
		created, updated     int64
	)
	err := sc.Scan(&t.ID, &t.Title, &t.Description, &t.Status, &t.Assignee, &t.ParentID, &deps,
		&t.Priority, &labels, &result, &t.Attempts, &lease, &t.Version,
		&created, &t.CreatedBy, &updated, &t.UpdatedBy, &areas)
	if err != nil {
		return t, err
	}
	if err := decodeJSON(areas, &t.Areas, "tasks", t.ID, "areas"); err != nil {
		return t, err
	}
	t.LeaseExpiresAt = fromNullMicros(lease)
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	if err := decodeJSON(deps, &t.DependsOn, "tasks", t.ID, "depends_on"); err != nil {
		return t, err
	}
	if err := decodeJSON(labels, &t.Labels, "tasks", t.ID, "labels"); err != nil {
		return t, err
	}
	if err := decodeJSON(result, &t.Result, "tasks", t.ID, "result"); err != nil {
		return t, err
	}
	return t, nil
}

func collectTasks(rows *sql.Rows) ([]workspace.Task, error) {
	defer rows.Close()
	var out []workspace.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: tasks: %w", err)
	}
	return out, nil
}

func (t *readTx) Task(ctx context.Context, id string) (workspace.Task, error) {
	task, err := scanTask(t.q.QueryRowContext(ctx, qTask, id))
	if err != nil {
		return task, notFound(err, "task "+id)
	}
	return task, nil
}

func (t *readTx) ListTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error) {
	return t.listTasks(ctx, f, "")
}

// ListReadyTasks is ListTasks of the pending tasks whose every dependency
// is done (ReadyTask's test), in ID order. It walks tasks_status (status,
// id) from f.After and stops at f.Limit ready tasks.
func (t *readTx) ListReadyTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error) {
	f.Status = workspace.TaskPending
	return t.listTasks(ctx, f, qNotWaiting)
}

func (t *readTx) listTasks(ctx context.Context, f workspace.TaskFilter, and string) ([]workspace.Task, error) {
	var b strings.Builder
	b.WriteString(`SELECT ` + taskCols + ` FROM tasks t WHERE t.id > ?`)
	b.WriteString(and)
	args := []any{f.After}
	if f.Status != "" {
		b.WriteString(` AND t.status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Assignee != "" {
		b.WriteString(` AND t.assignee = ?`)
		args = append(args, f.Assignee)
	}
	if f.ParentID != "" {
		b.WriteString(` AND t.parent_id = ?`)
		args = append(args, f.ParentID)
	}
	lc, largs := labelClauses("t.labels", f.Labels)
	b.WriteString(lc)
	args = append(args, largs...)
	b.WriteString(` ORDER BY t.id LIMIT +?`)
	args = append(args, limitArg(f.Limit))
	rows, err := t.q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tasks: %w", err)
	}
	return collectTasks(rows)
}

func (t *readTx) ReadyTask(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	var b strings.Builder
	b.WriteString(qReadyTask)
	var args []any
	if r.ParentID != "" {
		b.WriteString(` AND t.parent_id = ?`)
		args = append(args, r.ParentID)
	}
	lc, largs := labelClauses("t.labels", r.Labels)
	b.WriteString(lc)
	args = append(args, largs...)
	b.WriteString(qReadyTaskOrder)
	task, err := scanTask(t.q.QueryRowContext(ctx, b.String(), args...))
	if err != nil {
		return task, notFound(err, "ready task")
	}
	return task, nil
}

func (t *readTx) ExpiredClaims(ctx context.Context, now time.Time, limit int) ([]workspace.Task, error) {
	rows, err := t.q.QueryContext(ctx, qExpiredClaims, micros(now), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: expired claims: %w", err)
	}
	return collectTasks(rows)
}

func (t *readTx) Counts(ctx context.Context) (driver.Counts, error) {
	c := driver.Counts{Tasks: map[workspace.TaskStatus]int{}}
	if err := t.q.QueryRowContext(ctx, qCounts).Scan(&c.Artifacts, &c.Notes); err != nil {
		return c, fmt.Errorf("sqlite: counts: %w", err)
	}
	rows, err := t.q.QueryContext(ctx, qTaskCounts)
	if err != nil {
		return c, fmt.Errorf("sqlite: task counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s string
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			return c, fmt.Errorf("sqlite: task counts: %w", err)
		}
		c.Tasks[workspace.TaskStatus(s)] = n
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("sqlite: task counts: %w", err)
	}
	return c, nil
}

func (t *writeTx) PutTask(ctx context.Context, task workspace.Task) error {
	deps, err := jsonText(task.DependsOn, len(task.DependsOn) == 0)
	if err != nil {
		return err
	}
	labels, err := jsonText(task.Labels, len(task.Labels) == 0)
	if err != nil {
		return err
	}
	areas, err := jsonText(task.Areas, len(task.Areas) == 0)
	if err != nil {
		return err
	}
	res := task.Result
	result, err := jsonText(res, res.Summary == "" && len(res.Artifacts) == 0)
	if err != nil {
		return err
	}
	if _, err := t.q.ExecContext(ctx, qPutTask, task.ID, task.Title, task.Description, string(task.Status),
		task.Assignee, task.ParentID, deps, task.Priority, labels, result, task.Attempts,
		nullMicros(task.LeaseExpiresAt), task.Version, micros(task.CreatedAt), task.CreatedBy,
		micros(task.UpdatedAt), task.UpdatedBy, areas); err != nil {
		return fmt.Errorf("sqlite: put task %s: %w", task.ID, err)
	}
	// Dependencies are fixed at creation, but a task may arrive at any
	// version (an import), so the edges are ensured on every put.
	for _, d := range task.DependsOn {
		if _, err := t.q.ExecContext(ctx, qPutDep, task.ID, d); err != nil {
			return fmt.Errorf("sqlite: put task %s dependency %s: %w", task.ID, d, err)
		}
	}
	return nil
}

// DeleteTask implements driver.Tx: its dependency edges go first, as
// they reference the row.
func (t *writeTx) DeleteTask(ctx context.Context, id string) (bool, error) {
	var named bool
	if err := t.q.QueryRowContext(ctx, qTaskNamed, id).Scan(&named); err != nil {
		return false, fmt.Errorf("sqlite: delete task %s: %w", id, err)
	}
	if named {
		return false, nil
	}
	if _, err := t.q.ExecContext(ctx, qDeleteTaskDeps, id); err != nil {
		return false, fmt.Errorf("sqlite: delete task %s: %w", id, err)
	}
	res, err := t.q.ExecContext(ctx, qDeleteTask, id)
	if err != nil {
		return false, fmt.Errorf("sqlite: delete task %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
