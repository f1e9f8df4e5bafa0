package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// noPoll is a poll interval long enough that a test relying on it would
// time out: what such a test sees came from notifications.
const noPoll = time.Hour

// lazyHandle opens a handle on a store of its own whose listener refreshes
// its registration every ping and stops listening linger after its last
// waiter left, after tweaks (run before the engine starts). Its engine
// never polls in a test's lifetime.
func lazyHandle(t *testing.T, dsn string, ping, linger time.Duration, tweaks ...func(*listener)) (*workspace.Workspace, *store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	p.Config.Logger, p.Config.PollInterval = slog.Default(), noPoll
	st, err := engine.OpenStore(ctx, p)
	require.NoError(t, err)
	s := st.(*store)
	s.listener.ping, s.listener.linger = ping, linger
	for _, tweak := range tweaks {
		tweak(s.listener)
	}
	ws := engine.New(s, workspace.Options{PollInterval: noPoll})
	t.Cleanup(func() { _ = ws.Close() })
	return ws, s
}

// listeners counts the live registrations in dsn's schema.
func listeners(ctx context.Context, t *testing.T, admin *pgx.Conn, dsn string) int {
	t.Helper()
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{pgtest.SchemaOf(t, dsn), "listeners"}.Sanitize()+
		` WHERE expires_at > clock_timestamp()`).Scan(&n))
	return n
}

// waitListeners waits until dsn's schema has want live registrations.
func waitListeners(ctx context.Context, t *testing.T, admin *pgx.Conn, dsn string, want int) {
	t.Helper()
	for listeners(ctx, t, admin, dsn) != want {
		select {
		case <-ctx.Done():
			t.Fatalf("never %d live listener registrations (now %d)", want, listeners(ctx, t, admin, dsn))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitRegistered waits until the live registrations in dsn's schema are
// exactly those of stores: a count can hold while one store's registration
// has lapsed for a moment (its refresh late on a loaded machine) and
// another's, expected gone, is still there.
func waitRegistered(ctx context.Context, t *testing.T, admin *pgx.Conn, dsn string, stores ...*store) {
	t.Helper()
	want := make([]string, 0, len(stores))
	for _, s := range stores {
		want = append(want, s.id)
	}
	slices.Sort(want)
	live := func() []string {
		rows, err := admin.Query(ctx, `SELECT store FROM `+pgx.Identifier{pgtest.SchemaOf(t, dsn), "listeners"}.Sanitize()+
			` WHERE expires_at > clock_timestamp() ORDER BY store`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	for got := live(); !slices.Equal(got, want); got = live() {
		select {
		case <-ctx.Done():
			t.Fatalf("never the registrations %v (now %v)", want, got)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// notified listens on a workspace's channel as an outsider (unregistered,
// so it changes no writer's mind) and tells which commits notified.
type notified struct {
	conn    *pgx.Conn
	channel string
	round   int
}

func newNotified(ctx context.Context, t *testing.T, dsn string) *notified {
	t.Helper()
	n := &notified{conn: pgtest.Connect(t), channel: channelName(pgtest.SchemaOf(t, dsn))}
	_, err := n.conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize())
	require.NoError(t, err)
	return n
}

// since returns the payloads notified since the last call: it sends a
// marker of its own and takes every notification before it, which the
// server delivers in commit order.
func (n *notified) since(ctx context.Context, t *testing.T) []string {
	t.Helper()
	n.round++
	marker := fmt.Sprintf("marker %d", n.round)
	_, err := n.conn.Exec(ctx, "SELECT pg_notify($1, $2)", n.channel, marker)
	require.NoError(t, err)
	var got []string
	for {
		m, err := n.conn.WaitForNotification(ctx)
		require.NoError(t, err)
		if m.Payload == marker {
			return got
		}
		got = append(got, m.Payload)
	}
}

// writeNote writes a note on ws and returns the log's head after it (the
// tests that use it have one writer).
func writeNote(ctx context.Context, t *testing.T, ws *workspace.Workspace, key string) int64 {
	t.Helper()
	_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "writer"}, workspace.NotePut{Kind: "decision", Key: key, Body: "b"})
	require.NoError(t, err)
	st, err := ws.Status(ctx)
	require.NoError(t, err)
	return st.Head
}

// A commit sends a NOTIFY only while a store other than the writer's
// listens, and a store listens only while someone on it waits (and for
// its linger time after).
func TestWritersNotifyOnlyWhileAnotherStoreListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	writer, ws1 := lazyHandle(t, dsn, time.Second, 20*time.Millisecond)
	reader, rs := lazyHandle(t, dsn, time.Second, 20*time.Millisecond)
	admin := pgtest.Connect(t)
	outsider := newNotified(ctx, t, dsn)

	// No one waits: no store listens, no commit notifies.
	head := writeNote(ctx, t, writer, "quiet")
	assert.Empty(t, outsider.since(ctx, t), "no store listens: no NOTIFY")
	assert.Zero(t, listeners(ctx, t, admin, dsn))

	// The writer's own subscriber does not need a NOTIFY: its store
	// hands it its own commits in memory.
	own, err := writer.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}, Heartbeat: -1})
	require.NoError(t, err)
	waitRegistered(ctx, t, admin, dsn, ws1)
	head = writeNote(ctx, t, writer, "own")
	assert.Empty(t, outsider.since(ctx, t), "only the writer's own store listens: no NOTIFY")
	m, err := own.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, m.Event.Seq)

	// A subscriber on another store: the writer notifies, and the
	// subscriber hears it (the engine never polls here).
	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}, Heartbeat: -1})
	require.NoError(t, err)
	waitRegistered(ctx, t, admin, dsn, ws1, rs)
	head = writeNote(ctx, t, writer, "heard")
	assert.Equal(t, []string{fmt.Sprint(head)}, seqsOf(outsider.since(ctx, t)), "another store listens: one NOTIFY")
	m, err = sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, m.Event.Seq)

	// Once no one waits on it, the reader's store stops listening and
	// drops its registration: the writer stops notifying.
	require.NoError(t, sub.Close())
	waitRegistered(ctx, t, admin, dsn, ws1)
	writeNote(ctx, t, writer, "quiet again")
	assert.Empty(t, outsider.since(ctx, t), "the other store stopped listening: no NOTIFY")
	require.NoError(t, own.Close())
	waitRegistered(ctx, t, admin, dsn)
}

// seqsOf keeps the seq of each payload.
func seqsOf(payloads []string) []string {
	out := make([]string, len(payloads))
	for i, p := range payloads {
		seq, _ := payloadSeq(p)
		out[i] = fmt.Sprint(seq)
	}
	return out
}

// A listener that registers while another store writes misses no commit
// past the head read after it registered: each writer either saw the
// registration and notified, or committed before it and is in that head.
// A trigger holds every writer 20 ms between deciding whether to notify
// and its commit, so registrations land in that window. The check is on
// the listener itself, without the engine, whose rereads after a hint
// would cover a missed commit late instead of failing.
func TestARegistrationRacingAWriterMissesNoCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	writer, ws := lazyHandle(t, dsn, time.Second, time.Second)
	admin := pgtest.Connect(t)
	schema := pgx.Identifier{pgtest.SchemaOf(t, dsn)}.Sanitize()
	_, err := admin.Exec(ctx, `CREATE FUNCTION `+schema+`.slow() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END $$;
		CREATE TRIGGER slow BEFORE INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.slow()`)
	require.NoError(t, err)
	head := func() int64 {
		var n int64
		require.NoError(t, admin.QueryRow(ctx, `SELECT seq FROM `+schema+`.counters`).Scan(&n))
		return n
	}

	outsider := newNotified(ctx, t, dsn)
	const rounds = 20
	unnotified := 0
	for r := range rounds {
		wrote := make(chan error, 1)
		go func() {
			_, err := writer.Notes().Put(ctx, workspace.Write{Actor: "writer"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", r), Body: "b"})
			wrote <- err
		}()
		time.Sleep(time.Duration(r%4) * 3 * time.Millisecond)
		reg := newRegistration(pgtest.SchemaOf(t, dsn), ws.key, fmt.Sprint("racer-", r), time.Minute)
		l := newListener(ws.listener.cfg, ws.channel, reg, testLogger(t))
		l.start()
		waitSignal(ctx, t, l) // listening and registered
		seen := head()
		require.NoError(t, <-wrote)
		last := head()
		if last > seen {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			for l.heard.Load() < last && rctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			rcancel()
			assert.GreaterOrEqual(t, l.heard.Load(), last, "round %d: seq %d, committed after the head %d was read, was not notified", r, last, seen)
		}
		if len(outsider.since(ctx, t)) == 0 {
			unnotified++ // the writer decided before the registration: the head covers it
		}
		l.close()
		// Its registration is gone with it: the next writer decides anew.
		require.Zero(t, listeners(ctx, t, admin, dsn))
	}
	t.Logf("in %d of %d rounds the writer decided not to notify, before the registration", unnotified, rounds)
	assert.Positive(t, unnotified, "no writer decided before a registration: the race was not run")
}

// A registration that lapsed (its store paused past the TTL, or the row
// was lost) is found at the next refresh, written again, and the engine
// reads the log for what was committed without a NOTIFY meanwhile.
func TestALapsedRegistrationIsRenewedAndTheSubscriberCatchesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	writer, _ := lazyHandle(t, dsn, time.Second, time.Second)
	reader, _ := lazyHandle(t, dsn, 50*time.Millisecond, time.Second)
	admin := pgtest.Connect(t)
	outsider := newNotified(ctx, t, dsn)

	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	waitListeners(ctx, t, admin, dsn, 1)

	// The reader renews its registration every 50ms, so on a slow machine
	// it may renew between the lapse and the write, and the write is then
	// notified. Each such round still must reach the subscriber; the test
	// goes on until one write lands while the registration is lapsed (not
	// notified), which the subscriber must catch up on by its refresh.
	for attempt := 1; ; attempt++ {
		_, err = admin.Exec(ctx, `UPDATE `+pgx.Identifier{pgtest.SchemaOf(t, dsn), "listeners"}.Sanitize()+` SET expires_at = clock_timestamp() - interval '1 second'`)
		require.NoError(t, err)
		head := writeNote(ctx, t, writer, "while lapsed")
		notified := outsider.since(ctx, t)
		m, err := sub.Next(ctx)
		require.NoError(t, err, "the refresh found the lapse and the engine read the log")
		require.Equal(t, head, m.Event.Seq)
		if len(notified) == 0 {
			break // written while lapsed, and caught up
		}
		require.Less(t, attempt, 20, "the reader renewed its registration before every one of 20 writes")
		waitListeners(ctx, t, admin, dsn, 1)
	}
	waitListeners(ctx, t, admin, dsn, 1)
	head := writeNote(ctx, t, writer, "registered again")
	assert.Equal(t, []string{fmt.Sprint(head)}, seqsOf(outsider.since(ctx, t)))
	m, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, m.Event.Seq)
}

// A store whose listening connection dies leaves its registration to
// lapse; a dead store's row never makes a later registration fail, and is
// swept by it.
func TestRegistrationsOfDeadStoresAreSwept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	admin := pgtest.Connect(t)
	table := pgx.Identifier{pgtest.SchemaOf(t, dsn), "listeners"}.Sanitize()
	reader, _ := lazyHandle(t, dsn, time.Second, time.Second)
	_, err := admin.Exec(ctx, `INSERT INTO `+table+` VALUES ('dead', clock_timestamp() - interval '1 minute')`)
	require.NoError(t, err)

	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	waitListeners(ctx, t, admin, dsn, 1)
	var rows int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&rows))
	assert.Equal(t, 1, rows, "the dead store's row was swept")
}

// Waiters on a store that was not listening are woken by another store's
// release and task creation: starting to wait starts the listening, and
// the writer then notifies. Nothing here polls.
func TestWaitersOnAStoreThatWasNotListeningAreWoken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	holder, _ := lazyHandle(t, dsn, time.Second, 20*time.Millisecond)
	waiter, _ := lazyHandle(t, dsn, time.Second, 20*time.Millisecond)
	admin := pgtest.Connect(t)

	for round := range 5 {
		lease, err := holder.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "holder", TTL: time.Hour})
		require.NoError(t, err)
		waitListeners(ctx, t, admin, dsn, 0) // the waiter's store is idle
		got := make(chan error, 1)
		go func() {
			_, err := waiter.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "waiter", TTL: time.Hour, Wait: true})
			got <- err
		}()
		waitListeners(ctx, t, admin, dsn, 1)
		require.NoError(t, holder.Locks().Release(ctx, lease))
		require.NoError(t, <-got, "round %d: the waiter took the released lease", round)
		l, err := waiter.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "waiter", TTL: time.Hour})
		require.NoError(t, err)
		require.NoError(t, waiter.Locks().Release(ctx, l))

		claimed := make(chan error, 1)
		go func() {
			_, err := waiter.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "waiter", Wait: true})
			claimed <- err
		}()
		waitListeners(ctx, t, admin, dsn, 1)
		_, err = holder.Tasks().Create(ctx, workspace.Write{Actor: "holder"}, workspace.NewTask{Title: fmt.Sprint("t", round)})
		require.NoError(t, err)
		require.NoError(t, <-claimed, "round %d: the waiter claimed the new task", round)
	}
}
