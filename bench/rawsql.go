package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The raw SQL baselines (SQLite and Postgres) share their statements; only
// the schema, the placeholders and the claim's row locking differ.

// sqlQ runs statements inside a transaction.
type sqlQ interface {
	exec(ctx context.Context, query string, args ...any) (int64, error)
	queryRow(ctx context.Context, query string, args []any, dest ...any) error
}

// sqlConn is the bare driver: a write transaction or a read on the
// connections of pseudo-handle w.
type sqlConn interface {
	tx(ctx context.Context, w int, fn func(q sqlQ) error) error
	read(ctx context.Context, w int, fn func(q sqlQ) error) error
	// countRows runs a query on w's read connection and counts its rows.
	countRows(ctx context.Context, w int, query string, args ...any) (int, error)
}

// rawSQL is the baseline on a sqlConn.
type rawSQL struct {
	db sqlConn
	// claimLock is appended to the claim's SELECT (FOR UPDATE SKIP LOCKED on Postgres).
	claimLock string
	// notify is the statement that wakes listeners (Postgres), or "".
	notify string
	// listen sets up a listener for W6 (Postgres), or nil.
	listen func(ctx context.Context) (wait func(ctx context.Context) (time.Time, error), stop func(), err error)
	syncs  func(ctx context.Context) (int64, bool)
	prefix string
	// w3Loaded and w5Loaded count the rows loaded once per run.
	w3Loaded, w5Loaded int
}

const (
	rawUpdateArt = `UPDATE raw_art SET version = version + 1 WHERE id = ? AND version = ?`
	rawInsertVer = `INSERT INTO raw_ver (id, version, content) VALUES (?, ?, ?)`
	rawInsertEv  = `INSERT INTO raw_ev (actor, type, subject, version) VALUES (?, ?, ?, ?)`
	rawInsert3Ev = `INSERT INTO raw_ev (actor, type, subject, version) VALUES (?, ?, ?, ?), (?, ?, ?, ?), (?, ?, ?, ?)`
	rawCreateArt = `INSERT INTO raw_art (id, name, version) VALUES (?, ?, 1)`
	rawGetByName = `SELECT a.version, v.content FROM raw_art a JOIN raw_ver v ON v.id = a.id AND v.version = a.version WHERE a.name = ?`
	rawListPage  = `SELECT id, name, version FROM raw_art WHERE name > ? AND name < ? ORDER BY name LIMIT 100`
	rawAcquire   = `INSERT INTO raw_lease (resource, owner, token, expires) VALUES (?, ?, 1, ?)
ON CONFLICT (resource) DO UPDATE SET owner = excluded.owner, token = raw_lease.token + 1, expires = excluded.expires
WHERE raw_lease.owner = '' OR raw_lease.expires < ? RETURNING token`
	rawRelease   = `UPDATE raw_lease SET owner = '' WHERE resource = ? AND token = ? AND owner = ?`
	rawAddTask   = `INSERT INTO raw_task (id, grp, status, priority, dep) VALUES (?, ?, 'pending', 0, ?)`
	rawReadyTask = `SELECT id FROM raw_task t WHERE grp = ? AND status = 'pending'
AND (dep IS NULL OR EXISTS (SELECT 1 FROM raw_task d WHERE d.id = t.dep AND d.status = 'done'))
ORDER BY priority DESC, id LIMIT 1`
	rawClaimTask = `UPDATE raw_task SET status = 'in_progress', owner = ? WHERE id = ? AND status = 'pending'`
	rawDoneTask  = `UPDATE raw_task SET status = 'done' WHERE id = ? AND status = 'in_progress'`
	rawPutNote   = `INSERT INTO raw_note (kind, key, body, version) VALUES (?, ?, ?, 1)
ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body, version = raw_note.version + 1`
)

func (r *rawSQL) walSyncs(ctx context.Context) (int64, bool) {
	if r.syncs == nil {
		return 0, false
	}
	return r.syncs(ctx)
}

// artsPerWorker creates one raw artifact with a first version per goroutine.
func (r *rawSQL) artsPerWorker(ctx context.Context, tag string, s spec) ([]string, []int64, error) {
	ids := make([]string, s.c)
	versions := make([]int64, s.c)
	for w := range s.c {
		ids[w] = fmt.Sprintf("%s-%s-%s-c%d-%d", r.prefix, tag, strings.ReplaceAll(s.variant, " ", "_"), s.c, w)
		versions[w] = 1
		err := r.db.tx(ctx, w, func(q sqlQ) error {
			if _, err := q.exec(ctx, rawCreateArt, ids[w], ids[w]); err != nil {
				return err
			}
			_, err := q.exec(ctx, rawInsertVer, ids[w], 1, make([]byte, 1024))
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("raw setup: %w", err)
		}
	}
	return ids, versions, nil
}

// updateArt is W1's statements minus the event: a version-checked update
// and the new version's row.
func updateArt(ctx context.Context, q sqlQ, id string, v int64, w int) error {
	n, err := q.exec(ctx, rawUpdateArt, id, v)
	if err != nil {
		return err
	}
	if n != 1 {
		return errRows("update", n)
	}
	body := make([]byte, 1024)
	copy(body, fmt.Sprintf("%08d:%08d:", w, v))
	_, err = q.exec(ctx, rawInsertVer, id, v+1, body)
	return err
}

func (r *rawSQL) op(ctx context.Context, s spec) (op, func(), error) {
	nothing := func() {}
	switch s.workload {
	case "W1":
		ids, versions, err := r.artsPerWorker(ctx, "w1", s)
		if err != nil {
			return nil, nil, err
		}
		notify := s.variant == "vs raw+notify"
		return plain(func(ctx context.Context, w int) error {
			err := r.db.tx(ctx, w, func(q sqlQ) error {
				if err := updateArt(ctx, q, ids[w], versions[w], w); err != nil {
					return err
				}
				if _, err := q.exec(ctx, rawInsertEv, actor, "artifact.updated", ids[w], versions[w]+1); err != nil {
					return err
				}
				if notify {
					_, err := q.exec(ctx, r.notify)
					return err
				}
				return nil
			})
			if err == nil {
				versions[w]++
			}
			return err
		}), nothing, nil
	case "W2":
		ids, _, err := r.artsPerWorker(ctx, "w2", s)
		if err != nil {
			return nil, nil, err
		}
		return plain(func(ctx context.Context, w int) error {
			var (
				v       int64
				content []byte
			)
			return r.db.read(ctx, w, func(q sqlQ) error {
				return q.queryRow(ctx, rawGetByName, []any{ids[w]}, &v, &content)
			})
		}), nothing, nil
	case "W3":
		if err := r.loadArts(ctx, s.n); err != nil {
			return nil, nil, err
		}
		lo, hi := r.prefix+"/w3/", r.prefix+"/w30"
		return plain(func(ctx context.Context, w int) error {
			i := rand.IntN(max(1, s.n-100)) // #nosec G404 -- which record a benchmark reads needs no unpredictability
			n, err := r.db.countRows(ctx, w, rawListPage, w3Name(r.prefix, i), hi)
			if err == nil && n != min(100, s.n-i-1) {
				err = fmt.Errorf("raw W3: listed %d, want 100 (from %s)", n, lo)
			}
			return err
		}), nothing, nil
	case "W4":
		if s.variant != "" {
			return nil, nothing, nil
		}
		return plain(func(ctx context.Context, w int) error {
			res := fmt.Sprintf("%s/w4/c%d/%d", r.prefix, s.c, w)
			var token int64
			err := r.db.tx(ctx, w, func(q sqlQ) error {
				now := time.Now().UnixMicro()
				if err := q.queryRow(ctx, rawAcquire, []any{res, actor, now + 60e6, now}, &token); err != nil {
					return err
				}
				_, err := q.exec(ctx, rawInsertEv, actor, "lock.acquired", res, token)
				return err
			})
			if err != nil {
				return err
			}
			return r.db.tx(ctx, w, func(q sqlQ) error {
				n, err := q.exec(ctx, rawRelease, res, token, actor)
				if err != nil {
					return err
				}
				if n != 1 {
					return errRows("release", n)
				}
				_, err = q.exec(ctx, rawInsertEv, actor, "lock.released", res, token)
				return err
			})
		}), nothing, nil
	case "W5":
		grp, err := r.loadTasks(ctx, s.n)
		if err != nil {
			return nil, nil, err
		}
		return plain(func(ctx context.Context, w int) error {
			var id int64
			err := r.db.tx(ctx, w, func(q sqlQ) error {
				if err := q.queryRow(ctx, rawReadyTask+r.claimLock, []any{grp}, &id); err != nil {
					return err
				}
				n, err := q.exec(ctx, rawClaimTask, actor, id)
				if err != nil {
					return err
				}
				if n != 1 {
					return errRows("claim", n)
				}
				_, err = q.exec(ctx, rawInsertEv, actor, "task.claimed", fmt.Sprint(id), 1)
				return err
			})
			if isNoRows(err) {
				return errStop
			}
			if err != nil {
				return err
			}
			return r.db.tx(ctx, w, func(q sqlQ) error {
				n, err := q.exec(ctx, rawDoneTask, id)
				if err != nil {
					return err
				}
				if n != 1 {
					return errRows("done", n)
				}
				_, err = q.exec(ctx, rawInsertEv, actor, "task.updated", fmt.Sprint(id), 2)
				return err
			})
		}), nothing, nil
	case "W6":
		if r.listen == nil || s.variant == "resume" {
			return nil, nothing, nil
		}
		wait, stop, err := r.listen(ctx)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, w int) (time.Duration, error) {
			err := r.db.tx(ctx, w, func(q sqlQ) error {
				if _, err := q.exec(ctx, rawInsertEv, actor, "note.put", "w6", 1); err != nil {
					return err
				}
				_, err := q.exec(ctx, r.notify)
				return err
			})
			if err != nil {
				return 0, err
			}
			committed := time.Now()
			at, err := wait(ctx)
			if err != nil {
				return 0, err
			}
			return max(0, at.Sub(committed)), nil
		}, stop, nil
	case "W7":
		ids, versions, err := r.artsPerWorker(ctx, "w7", s)
		if err != nil {
			return nil, nil, err
		}
		return plain(func(ctx context.Context, w int) error {
			key := fmt.Sprintf("c%d-%d", s.c, w)
			err := r.db.tx(ctx, w, func(q sqlQ) error {
				if err := updateArt(ctx, q, ids[w], versions[w], w); err != nil {
					return err
				}
				if _, err := q.exec(ctx, rawPutNote, "bench", key+"-a", "a"); err != nil {
					return err
				}
				if _, err := q.exec(ctx, rawPutNote, "bench", key+"-b", "b"); err != nil {
					return err
				}
				_, err := q.exec(ctx, rawInsert3Ev,
					actor, "artifact.updated", ids[w], versions[w]+1,
					actor, "note.put", key+"-a", 0,
					actor, "note.put", key+"-b", 0)
				return err
			})
			if err == nil {
				versions[w]++
			}
			return err
		}), nothing, nil
	}
	return nil, nothing, nil
}

// loadArts inserts n rows named as W3's artifacts, 1000 per transaction.
func (r *rawSQL) loadArts(ctx context.Context, n int) error {
	const per = 1000
	for i := r.w3Loaded; i < n; i += per {
		err := r.db.tx(ctx, 0, func(q sqlQ) error {
			for k := i; k < min(n, i+per); k++ {
				name := w3Name(r.prefix, k)
				if _, err := q.exec(ctx, rawCreateArt, name, name); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("raw W3 load: %w", err)
		}
		r.w3Loaded = min(n, i+per)
	}
	return nil
}

// loadTasks inserts W5's pool once per run: task i >= 1000 depends on task i-1000.
func (r *rawSQL) loadTasks(ctx context.Context, n int) (string, error) {
	grp := r.prefix + "-w5"
	const per = 1000
	for i := r.w5Loaded; i < n; i += per {
		err := r.db.tx(ctx, 0, func(q sqlQ) error {
			for k := i; k < min(n, i+per); k++ {
				var dep any
				if k >= 1000 {
					dep = int64(k - 1000)
				}
				if _, err := q.exec(ctx, rawAddTask, int64(k), grp, dep); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("raw W5 load: %w", err)
		}
		r.w5Loaded = min(n, i+per)
	}
	return grp, nil
}
