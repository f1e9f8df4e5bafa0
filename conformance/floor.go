package conformance

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// The floor: a store seen through a wrapper that shows the engine the
// required Store, ReadTx and Tx and nothing else, or those and one chosen
// optional capability. The suite passing on it proves that a store
// without the others is correct, only slower.
//
// A floor DSN names the store behind it in its target, query-escaped:
//
//	conformance-floor:<escaped DSN>?ws_floor_keep=<capability>&<shared ws_ parameters>
//
// The shared ws_ parameters (ws_poll, ws_private, ...) are the engine's,
// so they are moved to the floor DSN, where the engine reads them; the
// backend's own stay with the store's DSN.

// floorScheme is the scheme the floor driver is registered under.
const floorScheme = "conformance-floor"

// paramFloorKeep names the one optional capability a floor store keeps.
const paramFloorKeep = "ws_floor_keep"

// The optional capabilities a floor store can keep, by the name of the
// driver interface. FloorRaiser comes with BelowFloorDeleter.
const (
	capSavepointer       = "Savepointer"
	capLateJoiner        = "LateJoiner"
	capHintedUpdater     = "HintedUpdater"
	capHintedViewer      = "HintedViewer"
	capNotifier          = "Notifier"
	capLogRewriter       = "LogRewriter"
	capBelowFloorDeleter = "BelowFloorDeleter"
	capCheckpointer      = "Checkpointer"
	capReclaimer         = "Reclaimer"
	capFileSnapshotter   = "FileSnapshotter"
)

// capabilities lists every optional capability, in the order the passes
// that keep one run.
var capabilities = []string{
	capSavepointer, capLateJoiner, capHintedUpdater, capHintedViewer, capNotifier,
	capLogRewriter, capBelowFloorDeleter, capCheckpointer, capReclaimer, capFileSnapshotter,
}

var registerFloor = sync.OnceFunc(func() { driver.Register(floorScheme, engine.Backend(floorDriver{})) })

// RunFloor runs the suite's cases whose engine paths change with the
// store's optional capabilities against h's stores with every one of
// those hidden: the engine sees the required Store, ReadTx and Tx and none
// of Savepointer, LateJoiner, HintedUpdater, HintedViewer, Notifier,
// LogRewriter, BelowFloorDeleter, Checkpointer, Reclaimer or
// FileSnapshotter, so it
// takes its slowest path everywhere. Then, for each of those the backend
// has, it runs the few cases that lean on it most with that one
// capability kept. Passing proves that optional means only slower.
//
// It runs a chosen part of the suite, not all of it, to keep its cost
// to seconds per backend: the cases of group commit, hinted reads and
// writes, waiters woken across stores, subscriptions, gc and compaction,
// and the model-based test (one seed), which drives every operation. The
// required interfaces' paths (the inventory, the chain) do not change on
// the floor, and Run covers them. h's stores must be a Driver's,
// registered as engine.Backend(d). A backend hooks in with
//
//	func TestConformanceFloor(t *testing.T) { conformance.RunFloor(t, harness{}) }
func RunFloor(t *testing.T, h Harness) {
	registerFloor()
	t.Run("Floor", func(t *testing.T) { runFloorCases(t, floorHarness{h: h}, floorCases) })
	has := storeCapabilities(t, h)
	for _, c := range capabilities {
		if !slices.Contains(has, c) || len(capabilityCases[c]) == 0 {
			continue
		}
		t.Run("FloorWith"+c, func(t *testing.T) { runFloorCases(t, floorHarness{h: h, keep: c}, capabilityCases[c]) })
	}
}

// runFloorCases runs the named cases on h, in parallel.
func runFloorCases(t *testing.T, h Harness, names []string) {
	for _, name := range names {
		fn := floorCase(name)
		if fn == nil {
			t.Fatalf("no case %q", name)
		}
		t.Run(name, func(t *testing.T) {
			if why, ok := inapplicable(h, name); ok {
				t.Skip("does not apply to this backend: " + why)
			}
			t.Parallel()
			fn(t, h)
		})
	}
}

// floorCases are the cases the floor pass runs: every case a pass keeping
// one capability runs, and the cases of the same paths that are left.
var floorCases = []string{
	"BatchesCommittedTogetherKeepTheirOwnOutcomes",
	"TaskClaimTakesHighestPriorityThenOldestReady",
	"LockReacquireByOwnerExtendsSameToken",
	"ArtifactGetReadsWhatAViewReads",
	"NoteTaskAndLockGetsReadWhatAViewReads",
	"TaskClaimWaitWokenByNewTask",
	"LockWaitAcquiresAfterRelease",
	"EventSubscribeBacklogThenLive",
	"EventSlowSubscriberMissesNothing",
	"EventCompactedBelowFloor",
	"GCRemovesWhatNoRuleKeepsInBatches",
	"GCUnderConcurrentWritersAndSubscribers",
	"RandomOperationsMatchTheModel",
	"SharedStore/ConcurrentIfVersionWritersHaveExactlyOneWinner",
	"SharedStore/GetsUnderWritesReadOneSnapshot",
	"SeparateStores/SubscribersSeeEveryEventOnceWhileHandlesWrite",
}

// capabilityCases names, for each capability, the few cases that lean on
// it most: a pass keeping it runs those. FileSnapshotter has none: no
// case of the suite takes a file backup (the backend that has it tests
// that).
var capabilityCases = map[string][]string{
	// Group commit: several jobs in one transaction, a savepoint each.
	capSavepointer: {
		"BatchesCommittedTogetherKeepTheirOwnOutcomes",
		"SharedStore/ConcurrentIfVersionWritersHaveExactlyOneWinner",
	},
	// Group commit with jobs joining a group under way (with the
	// savepoints a group needs).
	capLateJoiner: {
		"BatchesCommittedTogetherKeepTheirOwnOutcomes",
		"SharedStore/ConcurrentIfVersionWritersHaveExactlyOneWinner",
		"RandomOperationsMatchTheModel",
	},
	// Writes that read their records in the round trip that starts them.
	capHintedUpdater: {
		"BatchesCommittedTogetherKeepTheirOwnOutcomes",
		"TaskClaimTakesHighestPriorityThenOldestReady",
		"LockReacquireByOwnerExtendsSameToken",
	},
	// Gets answered in one round trip.
	capHintedViewer: {
		"ArtifactGetReadsWhatAViewReads",
		"NoteTaskAndLockGetsReadWhatAViewReads",
	},
	// Waiters on one store woken by another's commits.
	capNotifier: {
		"TaskClaimWaitWokenByNewTask",
		"LockWaitAcquiresAfterRelease",
		"EventSubscribeBacklogThenLive",
	},
	capLogRewriter:       gcCases,
	capBelowFloorDeleter: gcCases,
	capCheckpointer:      gcCases,
	capReclaimer:         gcCases,
}

// gcCases are the cases that run gc.
var gcCases = []string{
	"GCRemovesWhatNoRuleKeepsInBatches",
	"GCUnderConcurrentWritersAndSubscribers",
}

// floorCase returns the case named name: a core one (run on stores of
// their own per handle, as runCore runs it), the model-based one, or one
// of the concurrent ones under its mode.
func floorCase(name string) func(*testing.T, Harness) {
	for _, c := range slices.Concat(coreCases, policyCases, retentionCases) {
		if c.name == name {
			return func(t *testing.T, h Harness) { c.fn(t, private{h}) }
		}
	}
	switch name {
	case "RandomOperationsMatchTheModel":
		// One seed of three, to keep the pass short.
		return func(t *testing.T, h Harness) { testModelSeeds(t, private{h}, modelSeeds[:1]) }
	case "SharedStore/ConcurrentIfVersionWritersHaveExactlyOneWinner":
		return testIfVersionOneWinner
	case "SharedStore/GetsUnderWritesReadOneSnapshot":
		return testGetsUnderWritesReadOneSnapshot
	case "SeparateStores/SubscribersSeeEveryEventOnceWhileHandlesWrite":
		return func(t *testing.T, h Harness) { testSubscribersUnderWrites(t, private{h}) }
	}
	return nil
}

// floorHarness hands out floor DSNs on h's stores, keeping keep (none if
// empty).
type floorHarness struct {
	h    Harness
	keep string
}

func (f floorHarness) NewDSN(t testing.TB) string {
	t.Helper()
	return floorDSN(t, f.h.NewDSN(t), f.keep)
}

// Inapplicable passes on h's.
func (f floorHarness) Inapplicable() map[string]string {
	if ia, ok := f.h.(Inapplicable); ok {
		return ia.Inapplicable()
	}
	return nil
}

// floorDSN returns the floor DSN on the store dsn names, keeping keep.
func floorDSN(t testing.TB, dsn, keep string) string {
	t.Helper()
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	base, query, _ := strings.Cut(dsn, "?")
	vals, err := url.ParseQuery(query)
	require.NoError(t, err)
	inner, outer := url.Values{}, url.Values{}
	for k, v := range vals {
		if _, own := p.Config.Params[k]; own || !strings.HasPrefix(k, "ws_") {
			inner[k] = v
		} else {
			outer[k] = v
		}
	}
	if len(inner) > 0 {
		base += "?" + inner.Encode()
	}
	if keep != "" {
		outer.Set(paramFloorKeep, keep)
	}
	out := floorScheme + ":" + url.QueryEscape(base)
	if len(outer) > 0 {
		out += "?" + outer.Encode()
	}
	return out
}

// storeCapabilities opens one of h's stores and lists the optional
// capabilities it has.
func storeCapabilities(t *testing.T, h Harness) []string {
	t.Helper()
	ctx := testCtx(t)
	p, err := driver.ParseDSN(storeDSN(h, h.NewDSN(t)))
	require.NoError(t, err)
	st, err := engine.OpenStore(ctx, p)
	if err != nil {
		// A client of a server elsewhere has no store here to look at.
		t.Logf("no store to list the capabilities of: %v", err)
		return nil
	}
	defer func() { _ = st.Close() }()
	var has []string
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		if _, ok := tx.(driver.Savepointer); ok {
			has = append(has, capSavepointer)
		}
		return nil
	}))
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{capLateJoiner, driver.JoinsLate(st)},
		{capHintedUpdater, is[driver.HintedUpdater](st)},
		{capHintedViewer, is[driver.HintedViewer](st)},
		{capNotifier, is[driver.Notifier](st)},
		{capLogRewriter, is[driver.LogRewriter](st)},
		{capBelowFloorDeleter, is[driver.BelowFloorDeleter](st)},
		{capCheckpointer, is[driver.Checkpointer](st)},
		{capReclaimer, is[driver.Reclaimer](st)},
		{capFileSnapshotter, is[driver.FileSnapshotter](st)},
	} {
		if c.ok {
			has = append(has, c.name)
		}
	}
	t.Logf("optional capabilities of the store: %s", strings.Join(has, ", "))
	return has
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// floorDriver opens the store a floor DSN names behind a floor wrapper.
type floorDriver struct{}

func (floorDriver) Params() []string { return []string{paramFloorKeep} }

// inner returns the parsed DSN of the store behind cfg, with cfg's shared
// settings.
func (floorDriver) inner(cfg driver.Config) (driver.ParsedDSN, error) {
	dsn, err := url.QueryUnescape(cfg.Target)
	if err != nil {
		return driver.ParsedDSN{}, fmt.Errorf("floor DSN: %w", err)
	}
	p, err := driver.ParseDSN(dsn)
	if err != nil {
		return p, err
	}
	p.Config.Logger, p.Config.PollInterval = cfg.Logger, cfg.PollInterval
	p.Config.AutoMigrate = p.Config.AutoMigrate || cfg.AutoMigrate
	return p, nil
}

func (d floorDriver) Open(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	p, err := d.inner(cfg)
	if err != nil {
		return nil, err
	}
	keep := cfg.Params[paramFloorKeep]
	if keep != "" && !slices.Contains(capabilities, keep) {
		return nil, fmt.Errorf("%s=%q: not one of %s: %w", paramFloorKeep, keep, strings.Join(capabilities, ", "), workspace.ErrInvalid)
	}
	st, err := engine.OpenStore(ctx, p)
	if err != nil {
		return nil, err
	}
	return floorStore(st, keep), nil
}

// Probe asks the store's own driver, through a must-exist open.
func (d floorDriver) Probe(ctx context.Context, cfg driver.Config) error {
	p, err := d.inner(cfg)
	if err != nil {
		return err
	}
	ws, err := p.Backend.Open(ctx, p.Config, workspace.Options{MustExist: true, Private: true})
	if err != nil {
		return err
	}
	return ws.Close()
}

// floorStore wraps st so that the engine sees only the required
// interfaces and the capability keep, if st has it.
func floorStore(st driver.Store, keep string) driver.Store {
	f := floor{st: st, keep: keep}
	switch keep {
	case capLateJoiner:
		if driver.JoinsLate(st) {
			return floorLateJoiner{f}
		}
	case capHintedUpdater:
		if _, ok := st.(driver.HintedUpdater); ok {
			return floorHintedUpdater{f}
		}
	case capHintedViewer:
		if _, ok := st.(driver.HintedViewer); ok {
			return floorHintedViewer{f}
		}
	case capNotifier:
		if n, ok := st.(driver.Notifier); ok {
			return floorNotifier{f, n}
		}
	case capLogRewriter:
		if l, ok := st.(driver.LogRewriter); ok {
			return floorLogRewriter{f, l}
		}
	case capBelowFloorDeleter:
		if b, ok := st.(driver.BelowFloorDeleter); ok {
			return floorBelowFloorDeleter{f, b}
		}
	case capCheckpointer:
		if c, ok := st.(driver.Checkpointer); ok {
			return floorCheckpointer{f, c}
		}
	case capReclaimer:
		if r, ok := st.(driver.Reclaimer); ok {
			return floorReclaimer{f, r}
		}
	case capFileSnapshotter:
		if s, ok := st.(driver.FileSnapshotter); ok {
			return floorFileSnapshotter{f, s}
		}
	}
	return f
}

// floor is a store with its optional capabilities hidden but keep's, if
// that is a transaction's (Savepointer, also kept with LateJoiner, whose
// groups need it, and FloorRaiser with BelowFloorDeleter).
type floor struct {
	st   driver.Store
	keep string
}

func (f floor) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return f.st.Update(ctx, func(tx driver.Tx) error { return fn(f.tx(tx)) })
}

func (f floor) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	return f.st.View(ctx, func(tx driver.ReadTx) error { return fn(floorReadTx{tx}) })
}

func (f floor) Close() error { return f.st.Close() }

// tx hides tx's optional capabilities but the one kept.
func (f floor) tx(tx driver.Tx) driver.Tx {
	switch f.keep {
	case capSavepointer, capLateJoiner:
		if sp, ok := tx.(driver.Savepointer); ok {
			return savepointTx{tx, sp}
		}
	case capBelowFloorDeleter:
		if fr, ok := tx.(driver.FloorRaiser); ok {
			return floorRaiserTx{tx, fr}
		}
	}
	return floorTx{tx}
}

// floorReadTx and floorTx show only the required methods.
type (
	floorReadTx struct{ driver.ReadTx }
	floorTx     struct{ driver.Tx }
)

// savepointTx keeps the Savepointer capability of a transaction.
type savepointTx struct {
	driver.Tx
	driver.Savepointer
}

// floorRaiserTx keeps the FloorRaiser capability of a transaction.
type floorRaiserTx struct {
	driver.Tx
	driver.FloorRaiser
}

// floorLateJoiner keeps LateJoiner, on the floor's transactions.
type floorLateJoiner struct{ floor }

func (floorLateJoiner) JoinsLate() bool { return true }

// floorHintedUpdater keeps HintedUpdater, on the floor's transactions.
type floorHintedUpdater struct{ floor }

func (f floorHintedUpdater) UpdateHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) error {
	return f.st.(driver.HintedUpdater).UpdateHinted(ctx, hints, func(tx driver.Tx) error { return fn(f.tx(tx)) })
}

// floorHintedViewer keeps HintedViewer, on the floor's transactions.
type floorHintedViewer struct{ floor }

func (f floorHintedViewer) ViewHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	return f.st.(driver.HintedViewer).ViewHinted(ctx, hints, func(tx driver.ReadTx) error { return fn(floorReadTx{tx}) })
}

// The store-wide capabilities, each kept as it is.
type (
	floorNotifier struct {
		floor
		driver.Notifier
	}
	floorLogRewriter struct {
		floor
		driver.LogRewriter
	}
	floorBelowFloorDeleter struct {
		floor
		driver.BelowFloorDeleter
	}
	floorCheckpointer struct {
		floor
		driver.Checkpointer
	}
	floorReclaimer struct {
		floor
		driver.Reclaimer
	}
	floorFileSnapshotter struct {
		floor
		driver.FileSnapshotter
	}
)
