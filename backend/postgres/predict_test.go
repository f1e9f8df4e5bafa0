package postgres

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
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

// predictStores opens two stores on one new schema: a, whose writes the
// tests predict (one connection, round trips counted), and b, another
// process's store for all it knows, listening when listen is set.
func predictStores(t *testing.T, listen bool) (a *store, aws *workspace.Workspace, rt *RoundTrips, b *store, bws *workspace.Workspace) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	schema := pgtest.Schema(t)
	open := func(traced bool, noListen bool) (*store, *workspace.Workspace, *RoundTrips) {
		cfg, err := pgxpool.ParseConfig(pgtest.ServerDSN(t))
		require.NoError(t, err)
		rt := &RoundTrips{}
		if traced {
			cfg.ConnConfig.Tracer = rt
			cfg.MaxConns = 1
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		st, err := openStore(ctx, pool, false, Options{Schema: schema, NoListen: noListen, AutoMigrate: true})
		require.NoError(t, err)
		// The guard accepts a prediction's clock up to 100 ms behind the
		// database's: a loaded machine that parks the writer longer
		// between its prediction and the guard makes the database refuse
		// it, rightly, and these tests, which count round trips and
		// refusals for what the records say, would fail on the clock.
		// Here the window is a minute; the clock's check is the same SQL.
		st.guard = widenClockWindow(t, st.guard)
		st.guardOne = widenClockWindow(t, st.guardOne)
		// These tests count a write's round trips: the policy's head is
		// confirmed once, not again every 100ms of a slow run.
		ws := engine.New(st, workspace.Options{PolicyRecheck: time.Hour})
		t.Cleanup(func() { _ = ws.Close() })
		return st, ws, rt
	}
	a, aws, rt = open(true, true)
	b, bws, _ = open(false, !listen)
	return a, aws, rt, b, bws
}

// widenClockWindow is a guard's SQL with its clock window a minute wide.
func widenClockWindow(t *testing.T, sql string) string {
	t.Helper()
	const window = "interval '100 milliseconds'"
	require.Equal(t, 1, strings.Count(sql, window), "the guard checks the clock once")
	return strings.Replace(sql, window, "interval '1 minute'", 1)
}

// wasRefused reports whether the database refused one of st's predictions
// (the memo then waits for more quiet writes before the next).
func wasRefused(st *store) bool {
	st.memo.mu.Lock()
	defer st.memo.mu.Unlock()
	return st.memo.rule.Need() > 1
}

// A store's writes after its first run on what it knows, in one round trip
// each, and each write of another store that makes what it knows wrong
// makes the database refuse the prediction: the write then runs the usual
// way and ends as it would have without predictions. Every write appends
// an event, so the head's check alone finds a change made since the last
// write; the cases that relearn the head in between fail when the guard's
// check of the record they change is taken out. (A new version is also
// kept out by the versions' key; the head, by the events' append.)
func TestPredictionsAnotherStoreMadeWrongAreRefused(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	cases := []struct {
		name string
		// change is the other store's write between two of a's.
		change func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact)
		// check makes a's next write and checks how it ended.
		check func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact)
		// relearn: a writes elsewhere in between.
		relearn bool
		// held: ann holds the artifact's lock, through a, before.
		held bool
	}{{
		name: "a new version",
		change: func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact) {
			_, err := b.Artifacts().Update(ctx, workspace.Write{Actor: "bob"}, workspace.ArtifactRef{ID: doc.ID},
				workspace.ArtifactChange{Content: []byte("bob's")})
			require.NoError(t, err)
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			_, err := a.Artifacts().Update(ctx, workspace.Write{Actor: "ann", IfVersion: doc.Version},
				workspace.ArtifactRef{Name: doc.Name}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.ErrorIs(t, err, workspace.ErrConflict, "the version ann read is no longer the head")
			got, err := a.Artifacts().Get(ctx, workspace.ArtifactRef{ID: doc.ID})
			require.NoError(t, err)
			assert.Equal(t, "bob's", string(got.Content))
		},
	}, {
		name: "a delete",
		change: func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact) {
			require.NoError(t, b.Artifacts().Delete(ctx, workspace.Write{Actor: "bob"}, workspace.ArtifactRef{ID: doc.ID}))
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			_, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.ErrorIs(t, err, workspace.ErrNotFound, "a deleted artifact is not brought back")
			_, err = a.Artifacts().Get(ctx, workspace.ArtifactRef{Name: doc.Name})
			require.ErrorIs(t, err, workspace.ErrNotFound)
		},
		relearn: true,
	}, {
		name: "a lock taken",
		change: func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact) {
			_, err := b.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:" + doc.Name, Owner: "bob", TTL: time.Minute})
			require.NoError(t, err)
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			_, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.ErrorIs(t, err, workspace.ErrLocked, "bob holds the artifact's lock")
		},
		relearn: true,
	}, {
		name: "a lock released",
		change: func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact) {
			l, err := b.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:" + doc.Name, Owner: "bob", TTL: time.Minute})
			require.NoError(t, err)
			require.NoError(t, b.Locks().Release(ctx, l))
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			_, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.NoError(t, err, "a lease row released is no lock")
		},
		relearn: true,
	}, {
		name: "a lock taken over",
		held: true,
		change: func(t *testing.T, b *workspace.Workspace, doc workspace.Artifact) {
			res := "artifact:" + doc.Name
			require.NoError(t, b.Locks().ForceRelease(ctx, workspace.Write{Actor: "bob"}, res))
			_, err := b.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: "bob", TTL: time.Minute})
			require.NoError(t, err)
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			_, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.ErrorIs(t, err, workspace.ErrLocked, "bob took the lock over")
		},
		relearn: true,
	}, {
		name: "the head moved",
		change: func(t *testing.T, b *workspace.Workspace, _ workspace.Artifact) {
			_, err := b.Artifacts().Create(ctx, workspace.Write{Actor: "bob"}, workspace.NewArtifact{Name: "other", Content: []byte("x")})
			require.NoError(t, err)
		},
		check: func(t *testing.T, a *workspace.Workspace, doc workspace.Artifact) {
			got, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("ann's")})
			require.NoError(t, err)
			assert.Equal(t, doc.Version+1, got.Version)
			page, err := a.Events().Read(ctx, workspace.EventQuery{Limit: 100})
			require.NoError(t, err)
			for i, ev := range page.Events {
				assert.Equal(t, int64(i+1), ev.Seq, "the log has no gap")
			}
			last := page.Events[len(page.Events)-1]
			assert.Equal(t, doc.ID, last.Subject.ID, "ann's event comes after bob's")
			assert.Equal(t, workspace.EventArtifactUpdated, last.Type)
		},
	}}
	for _, c := range cases {
		for _, arrays := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/arrays=%v", c.name, arrays), func(t *testing.T) {
				st, a, rt, _, b := predictStores(t, false)
				st.guardArrays = arrays // the guard of a group, or of one record
				doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
				require.NoError(t, err)
				before := rt.N.Load()
				doc, err = a.Artifacts().Update(ctx, workspace.Write{Actor: "ann", IfVersion: doc.Version},
					workspace.ArtifactRef{Name: "doc"}, workspace.ArtifactChange{Content: []byte("v2")})
				require.NoError(t, err)
				require.Equal(t, int64(1), rt.N.Load()-before, "the update ran on what the create left")
				require.False(t, wasRefused(st))
				if c.held {
					_, err := a.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:doc", Owner: "ann", TTL: time.Minute})
					require.NoError(t, err)
				}

				c.change(t, b, doc)
				if c.relearn {
					// Writes of what a does not know go the usual way and
					// learn the head (the second finds nobody else wrote,
					// so a predicts again): only the record's own check is
					// left to find it changed.
					for _, name := range []string{"elsewhere", "elsewhere too"} {
						_, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: name, Content: []byte("x")})
						require.NoError(t, err)
					}
					require.False(t, wasRefused(st))
				}
				c.check(t, a, doc)
				assert.True(t, wasRefused(st), "the database refused the prediction")
			})
		}
	}
}

// A clock ahead of the database's is refused, so that a write never dates
// itself after the commits that follow it; a clock behind is raised to the
// last commit's time, so that time never goes back from one write to the
// next, and refused when that is still far behind the database's (leases
// are timed by the database's clock).
func TestPredictedClockIsNeitherAheadOfTheDatabaseNorBehindTheLastCommit(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	st, a, rt, _, _ := predictStores(t, false)
	doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)
	skew := func(d time.Duration) {
		st.memo.mu.Lock()
		st.memo.offset = d
		st.memo.mu.Unlock()
	}

	skew(time.Hour)
	got, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	assert.True(t, wasRefused(st), "a time an hour ahead was refused")
	assert.Less(t, got.UpdatedAt, time.Now().Add(time.Minute), "the write took the database's time")

	// After a refusal the store writes the usual way (learning the offset
	// again) until two writes found nobody else wrote.
	var prev workspace.Artifact
	for _, c := range []string{"v3", "v4"} {
		prev, err = a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte(c)})
		require.NoError(t, err)
	}
	skew(-time.Hour)
	before := rt.N.Load()
	got, err = a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v5")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), rt.N.Load()-before, "the prediction was taken")
	assert.False(t, got.UpdatedAt.Before(prev.UpdatedAt), "time went back: %s after %s", got.UpdatedAt, prev.UpdatedAt)

	// Behind the database's clock by more than a moment (the last commit
	// an hour old too, as if the clock had been stepped back since): refused.
	st.memo.mu.Lock()
	st.memo.now = st.memo.now.Add(-time.Hour)
	st.memo.mu.Unlock()
	got, err = a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v6")})
	require.NoError(t, err)
	assert.True(t, wasRefused(st), "a time an hour behind was refused")
	assert.WithinDuration(t, time.Now(), got.UpdatedAt, time.Minute, "the write took the database's time")
}

// A store that starts listening makes the others' predictions (that nobody
// listens, so no NOTIFY) wrong: the write runs the usual way and notifies.
func TestAPredictionThatNobodyListensIsRefusedOnceAStoreListens(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	st, a, _, b, bws := predictStores(t, true)
	doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)

	sub, err := bws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	admin := pgtest.Connect(t)
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM `+st.path+`.listeners WHERE expires_at > now()`).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, 5*time.Millisecond, "b registers as a listener")

	got, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	assert.True(t, wasRefused(st), "the prediction that nobody listens was refused")
	var seq int64
	select {
	case m := <-sub.C():
		seq = m.Event.Seq
		assert.Equal(t, got.Version, m.Event.Version)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "b's subscriber got nothing")
	}
	require.Eventually(t, func() bool { return b.NotifiedHead() >= seq }, 10*time.Second, time.Millisecond,
		"b heard of the write by its NOTIFY")
}

// The memo keeps its own copy of what it learns: a caller changing the
// labels of the artifact a write returned changes nothing the next
// predicted write starts from.
func TestThePredictionsLabelsAreTheStoresOwn(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	st, a, _, _, _ := predictStores(t, false)
	doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)
	got, err := a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID},
		workspace.ArtifactChange{Content: []byte("v2"), Labels: map[string]string{"stage": "draft"}})
	require.NoError(t, err)
	got.Labels["stage"] = "changed by the caller"
	got, err = a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v3")})
	require.NoError(t, err)
	assert.False(t, wasRefused(st))
	assert.Equal(t, map[string]string{"stage": "draft"}, got.Labels)
	stored, err := a.Artifacts().Get(ctx, workspace.ArtifactRef{ID: doc.ID})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"stage": "draft"}, stored.Labels)
}

// A transaction that rolled a savepoint back may not have kept its
// writes: the memo forgets, and the next write goes the usual way.
func TestAMemoForgetsATransactionThatRolledASavepointBack(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	st, a, _, _, _ := predictStores(t, false)
	doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		sp := tx.(driver.Savepointer)
		if err := sp.Savepoint(ctx); err != nil {
			return err
		}
		next := doc
		next.Version++
		if err := tx.PutArtifact(ctx, next, nil); err != nil {
			return err
		}
		return sp.RollbackSavepoint(ctx)
	}))
	st.memo.mu.Lock()
	valid := st.memo.valid
	st.memo.mu.Unlock()
	assert.False(t, valid, "the memo forgot")
	got, err := a.Artifacts().Update(ctx, workspace.Write{Actor: "ann", IfVersion: doc.Version},
		workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	assert.Equal(t, doc.Version+1, got.Version)
}

// The statements sent before the search_path is set (a predicted batch's
// guard; the reads of the batch that takes the lock; the one-statement
// views, outside a transaction) name every table they read with its
// schema: a batch's new statements are parsed before any of
// it runs, and a table named without it would not be found.
func TestStatementsParsedBeforeTheSearchPathNameTheirSchema(t *testing.T) {
	st, _, _, _, _ := predictStores(t, false)
	e := st.early
	for name, sql := range map[string]string{
		"guard": st.guard, "guardOne": st.guardOne, "startWrite": st.startWrite, "startRead": st.startRead,
		"byName": e.byName, "byID": e.byID, "lease": e.lease, "leaseOfArtifact": e.leaseOfArtifact,
		"note": e.note, "task": e.task, "lapsed": e.lapsed, "ready": e.ready,
		"artifactsByID": e.artifactsByID, "artifactsByName": e.artifactsByName,
		"leases": e.leases, "leasesOfArtifacts": e.leasesOfArtifacts,
		"view byName": st.viewAhead.byName, "view byID": st.viewAhead.byID, "view note": st.viewAhead.note,
		"view task": st.viewAhead.task, "view lease": st.viewAhead.lease,
	} {
		assert.False(t, unqualified().MatchString(sql), "%s names a table without its schema: %s", name, unqualified().FindString(sql))
		assert.Contains(t, sql, st.path+".", name)
	}
}

// A store whose writes alternate with another store's tries one
// prediction, which is refused, and then writes the usual way: its head is
// never where its last commit left it, so it never has the quiet writes a
// prediction waits for. Each refused prediction costs two round trips (the
// batch and its ROLLBACK) on top of the usual two.
func TestAStoreRacingAnotherStopsPredicting(t *testing.T) {
	ctx := context.Background()
	w := workspace.Write{Actor: "ann"}
	st, a, rt, _, b := predictStores(t, false)
	doc, err := a.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = b.Artifacts().Create(ctx, workspace.Write{Actor: "bob"}, workspace.NewArtifact{Name: "bob's", Content: []byte("v1")})
	require.NoError(t, err)
	const n = 20
	before := rt.N.Load()
	for i := range n {
		_, err := b.Artifacts().Update(ctx, workspace.Write{Actor: "bob"}, workspace.ArtifactRef{Name: "bob's"},
			workspace.ArtifactChange{Content: []byte{byte(i)}})
		require.NoError(t, err)
		_, err = a.Artifacts().Update(ctx, w, workspace.ArtifactRef{ID: doc.ID}, workspace.ArtifactChange{Content: []byte{byte(i)}})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2*n+2), rt.N.Load()-before, "one refused prediction, then two round trips a write")
	assert.True(t, wasRefused(st))
}

// Each guard gets one value per placeholder of its statement, in order:
// as many as its highest placeholder, and each placeholder the statement
// casts gets a value of the Go type pgx sends as that SQL type.
func TestGuardParamsFillTheirStatementsPlaceholdersInOrder(t *testing.T) {
	at := time.Now()
	p := prediction{now: at, head: 7, notify: true, early: []*earlyRead{
		{hint: driver.ReadHint{Artifact: workspace.ArtifactRef{ID: "a1"}},
			artifact: workspace.Artifact{ID: "a1", Name: "one", Version: 3},
			lease:    leaseAhead{resource: "artifact:one", lease: workspace.Lease{Resource: "artifact:one", Owner: "ann", Token: 2, AcquiredAt: at, ExpiresAt: at}}},
	}}
	casts := map[string]reflect.Type{
		"text[]":        reflect.TypeFor[string](), // a text[] literal (textArray)
		"bigint[]":      reflect.TypeFor[[]int64](),
		"timestamptz[]": reflect.TypeFor[[]time.Time](),
		"timestamptz":   reflect.TypeFor[time.Time](),
		"bigint":        reflect.TypeFor[*int64](),
		"boolean":       reflect.TypeFor[*bool](),
	}
	placeholder := regexp.MustCompile(`\$(\d+)(::(\w+(\[\])?))?`)
	for name, c := range map[string]struct {
		sql  string
		args []any
	}{
		"guardSQL":    {guardSQL, newGuardParams(p, "s").args()},
		"guardOneSQL": {guardOneSQL, newGuardOneParams(p, "s").args()},
	} {
		highest := 0
		for _, m := range placeholder.FindAllStringSubmatch(c.sql, -1) {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			highest = max(highest, n)
			if want, cast := casts[m[3]]; cast && n <= len(c.args) {
				assert.Equal(t, want, reflect.TypeOf(c.args[n-1]), "%s $%d::%s", name, n, m[3])
			}
		}
		assert.Len(t, c.args, highest, name)
		assert.Equal(t, []any{int64(7), at, "s", true}, c.args[:4], "%s $1-$4", name)
	}
}
