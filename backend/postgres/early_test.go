package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// earlyStore opens a store whose pool counts round trips, and a handle on
// it, with artifacts a0..a(n-1) in it.
func earlyStore(t *testing.T, n int) (*store, *RoundTrips, *workspace.Workspace, []workspace.Artifact) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cfg, err := pgxpool.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	rt := &RoundTrips{}
	cfg.ConnConfig.Tracer = rt
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := openStore(ctx, pool, false, Options{Schema: pgtest.Schema(t), NoListen: true})
	require.NoError(t, err)
	ws := engine.New(st, workspace.Options{})
	t.Cleanup(func() { _ = ws.Close() })
	var arts []workspace.Artifact
	for i := range n {
		a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "ann"},
			workspace.NewArtifact{Name: "a" + string(rune('0'+i)), Content: []byte{byte(i)}})
		require.NoError(t, err)
		arts = append(arts, a)
	}
	return st, rt, ws, arts
}

func hintsOf(refs ...workspace.ArtifactRef) []driver.ReadHint {
	var hs []driver.ReadHint
	for _, r := range refs {
		hs = append(hs, driver.ReadHint{Artifact: r})
	}
	return hs
}

// roundTripsOf runs fn in a transaction hinted with hints twice, the first
// time to prepare its statements, and returns the second's round trips.
func roundTripsOf(t *testing.T, st *store, rt *RoundTrips, hints []driver.ReadHint, fn func(tx driver.Tx) error) int64 {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.UpdateHinted(ctx, hints, fn))
	before := rt.N.Load()
	require.NoError(t, st.UpdateHinted(ctx, hints, fn))
	return rt.N.Load() - before
}

// next is a's next version, as the engine writes it.
func next(a workspace.Artifact, now time.Time) workspace.Artifact {
	a.Version++
	a.UpdatedAt, a.UpdatedBy = now, "bob"
	return a
}

// A group's ops read every hinted artifact and its lease from the round
// trip that took the lock: the transaction costs two round trips however
// many artifacts it reads and writes.
func TestHintedGroupReadsEveryArtifactAhead(t *testing.T) {
	ctx := context.Background()
	st, rt, _, arts := earlyStore(t, 4)
	var refs []workspace.ArtifactRef
	for i, a := range arts {
		if i%2 == 0 {
			refs = append(refs, workspace.ArtifactRef{Name: a.Name})
		} else {
			refs = append(refs, workspace.ArtifactRef{ID: a.ID})
		}
	}
	group := func(tx driver.Tx) error {
		for i, ref := range refs {
			a, err := tx.Artifact(ctx, ref)
			require.NoError(t, err)
			assert.Equal(t, arts[i].ID, a.ID)
			_, err = tx.Lease(ctx, "artifact:"+a.Name)
			require.ErrorIs(t, err, workspace.ErrNotFound)
			require.NoError(t, tx.PutArtifact(ctx, next(a, tx.Now()), nil))
		}
		return nil
	}
	assert.Equal(t, int64(2), roundTripsOf(t, st, rt, hintsOf(refs...), group), "the lock with the reads ahead, then the writes with the commit")
}

// A write drops the early reads it makes stale: of the artifact it writes
// (by ID, and by a name that found it), of the name it writes (found or
// not), and of the lease it writes; the reads that follow see the write.
func TestHintedReadsAheadGoStaleWithWrites(t *testing.T) {
	ctx := context.Background()
	st, _, _, arts := earlyStore(t, 3)
	a0, a1, a2 := arts[0], arts[1], arts[2]
	refs := []workspace.ArtifactRef{
		{Name: a0.Name}, {ID: a0.ID}, // the same artifact both ways
		{Name: "fresh"}, // not there yet
		{ID: a1.ID},     // its lease is written
		{ID: a2.ID},     // untouched
	}
	require.NoError(t, st.UpdateHinted(ctx, hintsOf(refs...), func(tx driver.Tx) error {
		now := tx.Now()
		got, err := tx.Artifact(ctx, refs[0])
		require.NoError(t, err)
		require.NoError(t, tx.PutArtifact(ctx, next(got, now), nil))
		got, err = tx.Artifact(ctx, refs[1])
		require.NoError(t, err)
		assert.Equal(t, a0.Version+1, got.Version, "read by ID after a write by name")

		fresh := a2
		fresh.ID, fresh.Name, fresh.Version = "f1", "fresh", 1
		fresh.CreatedAt, fresh.UpdatedAt = now, now
		require.NoError(t, tx.PutArtifact(ctx, fresh, []byte{9}))
		got, err = tx.Artifact(ctx, refs[2])
		require.NoError(t, err, "created after it was read ahead as missing")
		assert.Equal(t, "f1", got.ID)

		lease := workspace.Lease{Resource: "artifact:" + a1.Name, Owner: "carol", Token: 7, AcquiredAt: now, ExpiresAt: now.Add(time.Minute)}
		require.NoError(t, tx.PutLease(ctx, lease))
		got, err = tx.Artifact(ctx, refs[3])
		require.NoError(t, err)
		l, err := tx.Lease(ctx, "artifact:"+got.Name)
		require.NoError(t, err, "the lease written after the read ahead")
		assert.Equal(t, "carol", l.Owner)

		got, err = tx.Artifact(ctx, refs[4])
		require.NoError(t, err)
		assert.Equal(t, a2.Version, got.Version)
		return nil
	}))
}

// Notes and tasks are read ahead as artifacts are: a batch that writes an
// artifact, two notes and a task costs two round trips, and a write of a
// note, a task or its lease drops its read ahead, so that the reads that
// follow see the write.
func TestHintedNotesAndTasksAreReadAheadAndGoStaleWithWrites(t *testing.T) {
	ctx := context.Background()
	st, rt, ws, arts := earlyStore(t, 1)
	w := workspace.Write{Actor: "ann"}
	task, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	for _, k := range []string{"k1", "k2", "k3"} {
		_, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: k, Body: "v1"})
		require.NoError(t, err)
	}
	note := func(k string) driver.ReadHint { return driver.ReadHint{NoteKind: "decision", NoteKey: k} }
	hints := []driver.ReadHint{{Artifact: workspace.ArtifactRef{Name: arts[0].Name}}, note("k1"), note("k2"), note("k3"), {Task: task.ID}}

	batch := func(tx driver.Tx) error {
		a, err := tx.Artifact(ctx, hints[0].Artifact)
		require.NoError(t, err)
		require.NoError(t, tx.PutArtifact(ctx, next(a, tx.Now()), nil))
		for _, k := range []string{"k1", "k2"} {
			n, err := tx.Note(ctx, "decision", k)
			require.NoError(t, err)
			_, err = tx.Lease(ctx, "note:decision/"+k)
			require.ErrorIs(t, err, workspace.ErrNotFound)
			n.Version++
			require.NoError(t, tx.PutNote(ctx, n))
		}
		got, err := tx.Task(ctx, task.ID)
		require.NoError(t, err)
		_, err = tx.Lease(ctx, "task:"+task.ID)
		require.ErrorIs(t, err, workspace.ErrNotFound)
		got.Version++
		return tx.PutTask(ctx, got)
	}
	assert.Equal(t, int64(2), roundTripsOf(t, st, rt, hints, batch), "the lock with the reads ahead, then the writes with the commit")

	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		now := tx.Now()
		// Written before their reads: the reads see the writes.
		n := workspace.Note{Kind: "decision", Key: "k1", Body: "written", Author: "bob", Version: 9, CreatedAt: now, UpdatedAt: now, UpdatedBy: "bob"}
		require.NoError(t, tx.PutNote(ctx, n))
		got, err := tx.Note(ctx, "decision", "k1")
		require.NoError(t, err)
		assert.Equal(t, "written", got.Body)

		require.NoError(t, tx.DeleteNote(ctx, "decision", "k2"))
		_, err = tx.Note(ctx, "decision", "k2")
		require.ErrorIs(t, err, workspace.ErrNotFound, "deleted after it was read ahead")

		lease := workspace.Lease{Resource: "note:decision/k3", Owner: "carol", Token: 3, AcquiredAt: now, ExpiresAt: now.Add(time.Minute)}
		require.NoError(t, tx.PutLease(ctx, lease))
		_, err = tx.Note(ctx, "decision", "k3")
		require.NoError(t, err)
		l, err := tx.Lease(ctx, "note:decision/k3")
		require.NoError(t, err, "the lease written after the read ahead")
		assert.Equal(t, "carol", l.Owner)

		tk, err := tx.Task(ctx, task.ID) // the read ahead, untouched
		require.NoError(t, err)
		tk.Title, tk.Version = "renamed", tk.Version+1
		require.NoError(t, tx.PutTask(ctx, tk))
		again, err := tx.Task(ctx, task.ID)
		require.NoError(t, err)
		assert.Equal(t, "renamed", again.Title)
		return nil
	}))

	// A task written before its read ahead is taken.
	require.NoError(t, st.UpdateHinted(ctx, hints[4:], func(tx driver.Tx) error {
		tk, err := tx.ReadyTask(ctx, workspace.ClaimRequest{Actor: "ann"})
		require.NoError(t, err)
		tk.Title, tk.Version = "claimed", tk.Version+1
		require.NoError(t, tx.PutTask(ctx, tk))
		got, err := tx.Task(ctx, task.ID)
		require.NoError(t, err)
		assert.Equal(t, "claimed", got.Title)
		return nil
	}))
}

// A claim's lapsed claims and ready task are read ahead with the lock: the
// lapsed ones are those lapsed by the transaction's clock, not the later
// one they were read by, and the ready task is read again once a task was
// written (a reaped claim, an earlier op's write).
func TestHintedClaimReadsAheadExactlyWhatItWouldRead(t *testing.T) {
	ctx := context.Background()
	st, _, ws, _ := earlyStore(t, 0)
	w := workspace.Write{Actor: "ann"}
	var ids []string
	for i := range 4 {
		task, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: fmt.Sprint("t", i), Priority: 10 - i})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	// Two claimed tasks whose claims lapsed a minute and a second ago.
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		for i, ago := range []time.Duration{time.Minute, time.Second} {
			task, err := tx.Task(ctx, ids[i])
			require.NoError(t, err)
			task.Status, task.Assignee, task.LeaseExpiresAt, task.Version = workspace.TaskInProgress, "old", tx.Now().Add(-ago), task.Version+1
			require.NoError(t, tx.PutTask(ctx, task))
		}
		return nil
	}))
	req := workspace.ClaimRequest{Actor: "bob"}
	hints := []driver.ReadHint{{Claim: &req}}

	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		// Asked as of 30 s ago, only the claim lapsed a minute ago counts.
		lapsed, err := tx.ExpiredClaims(ctx, tx.Now().Add(-30*time.Second), 100)
		require.NoError(t, err)
		require.Len(t, lapsed, 1)
		assert.Equal(t, ids[0], lapsed[0].ID)
		// No task written: the ready task read ahead is the answer.
		ready, err := tx.ReadyTask(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, ids[2], ready.ID)
		return nil
	}))

	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		lapsed, err := tx.ExpiredClaims(ctx, tx.Now(), 1)
		require.NoError(t, err)
		require.Len(t, lapsed, 1, "the limit holds")
		assert.Equal(t, ids[0], lapsed[0].ID, "oldest first")
		// The reaped task is pending again and the best: the ready task is read anew.
		reaped := lapsed[0]
		reaped.Status, reaped.Assignee, reaped.LeaseExpiresAt, reaped.Version = workspace.TaskPending, "", time.Time{}, reaped.Version+1
		require.NoError(t, tx.PutTask(ctx, reaped))
		ready, err := tx.ReadyTask(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, ids[0], ready.ID)
		return nil
	}))

	// Another claim's request is not answered from this one's read.
	other := workspace.ClaimRequest{Actor: "bob", Labels: map[string]string{"team": "none"}}
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		_, err := tx.ExpiredClaims(ctx, tx.Now(), 100)
		require.NoError(t, err)
		_, err = tx.ReadyTask(ctx, other)
		require.ErrorIs(t, err, workspace.ErrNotFound)
		return nil
	}))
}

// A lease is read ahead with the lock, and its write drops the read ahead.
func TestHintedLeaseIsReadAheadAndGoesStaleWithItsWrite(t *testing.T) {
	ctx := context.Background()
	st, rt, _, _ := earlyStore(t, 0)
	hints := []driver.ReadHint{{Lease: "role:lead"}, {Lease: "role:other"}}
	cycle := func(tx driver.Tx) error {
		l, err := tx.Lease(ctx, "role:lead")
		if errors.Is(err, workspace.ErrNotFound) {
			l = workspace.Lease{Resource: "role:lead"}
		} else {
			require.NoError(t, err)
		}
		l.Owner, l.Token, l.AcquiredAt, l.ExpiresAt = "ann", l.Token+1, tx.Now(), tx.Now().Add(time.Minute)
		return tx.PutLease(ctx, l)
	}
	assert.Equal(t, int64(2), roundTripsOf(t, st, rt, hints, cycle), "the lock with the lease read ahead, then the write with the commit")

	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		now := tx.Now()
		require.NoError(t, tx.PutLease(ctx, workspace.Lease{Resource: "role:other", Owner: "bob", Token: 5, AcquiredAt: now, ExpiresAt: now.Add(time.Minute)}))
		l, err := tx.Lease(ctx, "role:other")
		require.NoError(t, err, "written after it was read ahead as missing")
		assert.Equal(t, "bob", l.Owner)
		l, err = tx.Lease(ctx, "role:lead")
		require.NoError(t, err)
		assert.Equal(t, int64(2), l.Token, "the read ahead, untouched")
		return nil
	}))
}

// A group's artifacts are read ahead together, a few statements for all of
// them; what each read then returns is what it reads without a hint, in
// every state an artifact can be in: found by name or by ID, missing
// either way, deleted, its lease held or not.
func TestGroupReadsAheadReadWhatTheReadsRead(t *testing.T) {
	ctx := context.Background()
	st, rt, ws, arts := earlyStore(t, 4)
	a0, a1, a2, a3 := arts[0], arts[1], arts[2], arts[3]
	require.NoError(t, ws.Artifacts().Delete(ctx, workspace.Write{Actor: "ann"}, workspace.ArtifactRef{ID: a3.ID}))
	_, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:" + a1.Name, Owner: "carol", TTL: time.Hour})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:missing", Owner: "dave", TTL: time.Hour})
	require.NoError(t, err)
	refs := []workspace.ArtifactRef{
		{Name: a0.Name}, {ID: a1.ID}, {Name: a1.Name}, {ID: a2.ID},
		{Name: "missing"}, {ID: "nope"}, {Name: a3.Name}, {ID: a3.ID},
	}
	type read struct {
		artifact        workspace.Artifact
		missing         bool
		resource        string
		lease           workspace.Lease
		leaseMissing    bool
		leaseReadFailed error
	}
	reads := func(got *[]read) func(tx driver.Tx) error {
		return func(tx driver.Tx) error {
			*got = nil
			for _, ref := range refs {
				a, err := tx.Artifact(ctx, ref)
				r := read{artifact: a, missing: errors.Is(err, workspace.ErrNotFound)}
				if err != nil && !r.missing {
					return err
				}
				switch {
				case ref.Name != "":
					r.resource = "artifact:" + ref.Name
				case !r.missing:
					r.resource = "artifact:" + a.Name
				}
				if r.resource != "" {
					l, err := tx.Lease(ctx, r.resource)
					r.lease, r.leaseMissing = l, errors.Is(err, workspace.ErrNotFound)
					if err != nil && !r.leaseMissing {
						r.leaseReadFailed = err
					}
				}
				*got = append(*got, r)
			}
			return nil
		}
	}
	var plain, hinted []read
	require.NoError(t, st.Update(ctx, reads(&plain)))
	assert.Equal(t, int64(2), roundTripsOf(t, st, rt, hintsOf(refs...), reads(&hinted)), "every read was read ahead")
	require.Len(t, hinted, len(refs))
	assert.Equal(t, plain, hinted)
	assert.Equal(t, []bool{false, false, false, false, true, true, true, true},
		[]bool{hinted[0].missing, hinted[1].missing, hinted[2].missing, hinted[3].missing,
			hinted[4].missing, hinted[5].missing, hinted[6].missing, hinted[7].missing})
	assert.Equal(t, "carol", hinted[1].lease.Owner, "a lease found through the ID")
	assert.Equal(t, "carol", hinted[2].lease.Owner)
	assert.Equal(t, "dave", hinted[4].lease.Owner, "a lease on a name no artifact has")
	assert.True(t, hinted[0].leaseMissing)
}

// The statements that run under generic plans (a group's reads ahead, the
// events of a group) put plan_cache_mode back as they found it: what the
// session's statements after them are planned by does not change.
func TestGenericPlansEndWithTheirStatements(t *testing.T) {
	ctx := context.Background()
	st, _, _, arts := earlyStore(t, 2)
	// A transaction run on a prediction fails its first read and runs
	// again the usual way: mode's error is returned, not asserted.
	mode := func(tx driver.Tx) (string, error) {
		var m string
		err := tx.(*writeTx).q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&m)
		return m, err
	}
	refs := []workspace.ArtifactRef{{Name: arts[0].Name}, {ID: arts[1].ID}}
	require.NoError(t, st.UpdateHinted(ctx, hintsOf(refs...), func(tx driver.Tx) error {
		m, err := mode(tx)
		if err != nil {
			return err
		}
		assert.Equal(t, "auto", m, "after the reads ahead")
		for _, ref := range refs {
			a, err := tx.Artifact(ctx, ref)
			require.NoError(t, err)
			require.NoError(t, tx.PutArtifact(ctx, next(a, tx.Now()), nil))
		}
		ev := workspace.Event{Time: tx.Now(), Actor: "bob", Type: workspace.EventArtifactUpdated}
		_, err = tx.AppendEvents(ctx, []workspace.Event{ev, ev})
		require.NoError(t, err)
		m, err = mode(tx)
		require.NoError(t, err)
		assert.Equal(t, "auto", m, "after the events")
		return nil
	}))
}
