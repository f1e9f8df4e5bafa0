package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// coreCase is one single-feature case: it gets a harness and makes its own
// fresh store(s).
type coreCase struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// coreCases is the flat list of single-feature cases, in the order a new
// backend would want to pass them.
var coreCases = []coreCase{
	// artifacts.go
	{"ArtifactCreateGetUpdateKeepsEveryVersion", testArtifactCreateGetUpdate},
	{"ArtifactRollbackWritesANewVersion", testArtifactRollback},
	{"ArtifactContentRoundTripsByteForByte", testArtifactContentRoundTrips},
	{"ArtifactNameIsUniqueAmongLiveArtifacts", testArtifactNameUnique},
	{"ArtifactDeleteFreesNameKeepsVersions", testArtifactDelete},
	{"ArtifactStaleIfVersionConflicts", testArtifactIfVersionConflict},
	{"ArtifactIdenticalContentStillVersions", testArtifactIdenticalContent},
	{"ArtifactListFilters", testArtifactListFilters},
	{"ArtifactListPagesWithoutGapsOrDuplicates", testArtifactListPagination},
	{"ArtifactOverSizeLimitIsTooLarge", testArtifactSizeLimit},
	{"ArtifactNamesAndLabelsAreExact", testArtifactNamesAreExact},
	// reads.go
	{"ArtifactGetReadsWhatAViewReads", testGetReadsWhatAViewReads},
	{"NoteTaskAndLockGetsReadWhatAViewReads", testRecordGetsReadWhatAViewReads},
	// notes.go
	{"NotePutGetUpdateWithIfVersion", testNotePutGetUpdate},
	{"NoteDelete", testNoteDelete},
	{"NoteListByKindWithCursor", testNoteList},
	// reserved.go
	{"ReservedKindsAreWrittenOnlyByTheirOwners", testReservedKinds},
	{"APrincipalWritesOnlyAsItsOwnActor", testPrincipalActsOnlyAsItself},
	// tasks.go
	{"TaskCreateAndGet", testTaskCreateGet},
	{"TaskAreasRoundTripAndClaimAvoidsOverlap", testTaskAreas},
	{"TaskStateMachine", testTaskStateMachine},
	{"TaskClaimTakesHighestPriorityThenOldestReady", testTaskClaimOrder},
	{"TaskClaimFilters", testTaskClaimFilters},
	{"TaskExpiredClaimReturnsTask", testTaskClaimLeaseExpiry},
	{"TaskHeartbeatExtendsClaim", testTaskHeartbeatExtends},
	{"TaskOnlyAssigneeFinishes", testTaskOnlyAssigneeFinishes},
	{"TaskReleaseReturnsToPending", testTaskRelease},
	{"TaskClaimWaitWokenByNewTask", testTaskClaimWait},
	{"TaskListFiltersAndPages", testTaskList},
	// locks.go
	{"LockContentionReportsHolder", testLockHeldRefusesOthers},
	{"LockReacquireByOwnerExtendsSameToken", testLockReacquire},
	{"LockExpiresWithoutCleanup", testLockExpiry},
	{"LockRenew", testLockRenew},
	{"LockKeepsItsTTL", testLockKeepsItsTTL},
	{"LockReleaseOnlyByOwnerWithToken", testLockRelease},
	{"LockForceReleaseIsRecorded", testLockForceRelease},
	{"LockedArtifactRefusesOtherWriters", testLockedArtifact},
	{"LockStaleFenceRejected", testLockStaleFence},
	{"LockWaitAcquiresAfterRelease", testLockWaitRelease},
	{"LockWaitAcquiresAfterExpiry", testLockWaitExpiry},
	// fences.go
	{"LockForceReleaseRevokesTheFence", testForceReleaseRevokesTheFence},
	{"LockFencedCreateAfterRevokeIsStale", testFencedCreateAfterRevokeIsStale},
	// stop.go
	{"StopActorEndsItsLeasesAndClaims", testStopActorEndsItsLeasesAndClaims},
	{"StopActorEndsItsSuffixedNames", testStopActorEndsItsSuffixedNames},
	// events.go
	{"EventOnePerChange", testEventOnePerChange},
	{"EventReadFilters", testEventReadFilters},
	{"EventReadPages", testEventReadPaging},
	{"EventSubscribeBacklogThenLive", testEventSubscribeBacklogThenLive},
	{"EventSubscribeResumesFromSavedSeq", testEventSubscribeResume},
	{"EventSubscribeIdleHeartbeats", testEventSubscribeHeartbeat},
	{"EventSlowSubscriberMissesNothing", testEventSlowSubscriber},
	{"EventSubscribeEndsWithCauseNeverSkips", testEventSubscribeEnds},
	{"EventVisibleOnlyAfterCommit", testEventVisibleOnlyAfterCommit},
	{"EventCompactedBelowFloor", testEventCompact},
	{"EventSubscribePastTheHeadIsRewound", testEventSubscribePastTheHeadIsRewound},
	// batches.go
	{"BatchIsAllOrNothing", testBatchAllOrNothing},
	{"BatchEventsHaveConsecutiveSeqs", testBatchConsecutiveSeqs},
	{"BatchReadsItsOwnWrites", testBatchReadYourWrites},
	{"BatchPublishCompleteRelease", testBatchReleasesLock},
	{"BatchesCommittedTogetherKeepTheirOwnOutcomes", testBatchesCommittedTogetherKeepTheirOwnOutcomes},
	// idempotency.go
	{"IdempotentRetryReturnsFirstResult", testIdempotentRetry},
	{"IdempotentBatchReplays", testIdempotentBatch},
	{"IdempotencyKeysExpire", testIdempotencyKeysExpire},
	{"IdempotencyKeysArePerActorAndRequest", testIdempotencyKeysArePerActorAndRequest},
	// badinput.go
	{"BadInputIsInvalidAndWritesNothing", testBadInput},
	{"InjectionShapedInputIsExactOrInvalid", testInjectionShapedInput}, // injection.go
	{"BadDSNParamsAreInvalid", testBadDSN},
	{"MustExistFindsNoWorkspaceAndCreatesNone", testMustExistFindsNoWorkspaceAndCreatesNone}, // mustexist.go
	{"ProbeAndOpenExistingAgree", testProbeAndOpenExistingAgree},
	{"ClosedHandleRefusesEveryCall", testClosedHandle},
	{"StatusReportsTheWorkspace", testStatus},
	// reopen.go
	{"ReopenKeepsEverything", testReopenKeepsEverything},
}

// runCore runs the single-feature cases: artifacts, notes, tasks, locks,
// events, batches, idempotency, bad input. Each case has its own store, so
// they run in parallel.
func runCore(t *testing.T, h Harness) {
	t.Run("Smoke", func(t *testing.T) { testSmoke(t, h) })
	for _, c := range slices.Concat(coreCases, policyCases, retentionCases, messageCases) {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := inapplicable(h, c.name); ok {
				t.Skip("does not apply to this backend: " + why)
			}
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// dsnWith returns dsn with the query parameter key=value added, whether or
// not dsn already has a query.
func dsnWith(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// as is an unconditional write by actor.
func as(actor string) workspace.Write { return workspace.Write{Actor: actor} }

// asAt is a write by actor conditioned on the record being at version v.
func asAt(actor string, v int64) workspace.Write {
	return workspace.Write{Actor: actor, IfVersion: v}
}

// isAny reports whether err matches any of targets.
func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// headOf returns the event log's head.
func headOf(t testing.TB, ws *workspace.Workspace) int64 {
	t.Helper()
	h, err := ws.Events().Head(testCtx(t))
	require.NoError(t, err)
	return h
}

// readAll reads every event matching q, page by page.
func readAll(t testing.TB, ws *workspace.Workspace, q workspace.EventQuery) []workspace.Event {
	t.Helper()
	ctx := testCtx(t)
	if q.Limit == 0 {
		q.Limit = 1000
	}
	var out []workspace.Event
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "events.Read does not end")
		page, err := ws.Events().Read(ctx, q)
		require.NoError(t, err)
		out = append(out, page.Events...)
		if len(page.Events) < q.Limit {
			return out
		}
		require.Greater(t, page.Next, q.AfterSeq, "events.Read: Next does not advance")
		q.AfterSeq = page.Next
	}
}

// eventsAfter returns every event with seq > after.
func eventsAfter(t testing.TB, ws *workspace.Workspace, after int64) []workspace.Event {
	t.Helper()
	return readAll(t, ws, workspace.EventQuery{AfterSeq: after})
}

// types lists the events' types.
func types(evs []workspace.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline: the suite asserts outcomes, never how fast they come.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sleepPast sleeps until the wall clock is past when (plus a margin for the
// store's clock granularity).
func sleepPast(when time.Time) {
	if d := time.Until(when) + 20*time.Millisecond; d > 0 {
		time.Sleep(d)
	}
}

// requireSameArtifactMeta checks that got is the same version of the same
// artifact as want, field by field (times exactly: stores keep microseconds).
func requireSameArtifactMeta(t testing.TB, want, got workspace.Artifact) {
	t.Helper()
	assert.Equal(t, want.ID, got.ID, "ID")
	assert.Equal(t, want.Name, got.Name, "Name")
	assert.Equal(t, want.Kind, got.Kind, "Kind")
	assert.Equal(t, want.Owner, got.Owner, "Owner")
	assert.Equal(t, want.Version, got.Version, "Version")
	assert.Equal(t, want.ContentType, got.ContentType, "ContentType")
	assert.Equal(t, want.SHA256, got.SHA256, "SHA256")
	assert.Equal(t, want.Size, got.Size, "Size")
	assert.Equal(t, normLabels(want.Labels), normLabels(got.Labels), "Labels")
	assert.Equal(t, want.TaskID, got.TaskID, "TaskID")
	assertSameTime(t, want.CreatedAt, got.CreatedAt, "CreatedAt")
	assert.Equal(t, want.CreatedBy, got.CreatedBy, "CreatedBy")
	assertSameTime(t, want.UpdatedAt, got.UpdatedAt, "UpdatedAt")
	assert.Equal(t, want.UpdatedBy, got.UpdatedBy, "UpdatedBy")
}

// assertSameTime checks that got is the instant want, in UTC.
func assertSameTime(t testing.TB, want, got time.Time, field string) {
	t.Helper()
	assert.Truef(t, want.Equal(got), "%s: want %s, got %s", field, want.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano))
	assert.Equalf(t, time.UTC, got.Location(), "%s is not UTC", field)
}

func normLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// snapshot is what "the store is unchanged" compares: the head and the
// dashboard counts.
type snapshot struct {
	Head      int64
	Artifacts int
	Notes     int
	Tasks     map[workspace.TaskStatus]int
	Locks     []string
}

func snap(t testing.TB, ws *workspace.Workspace) snapshot {
	t.Helper()
	st, err := ws.Status(testCtx(t))
	require.NoError(t, err)
	s := snapshot{Head: st.Head, Artifacts: st.Artifacts, Notes: st.Notes, Tasks: map[workspace.TaskStatus]int{}}
	for k, v := range st.Tasks {
		if v != 0 {
			s.Tasks[k] = v
		}
	}
	for _, l := range st.Locks {
		s.Locks = append(s.Locks, l.Resource+"#"+l.Owner)
	}
	return s
}

// result is what a background call delivers.
type result[T any] struct {
	v   T
	err error
}

// goCall runs fn in a goroutine and delivers its result on the returned
// channel; the test waits for it in Cleanup at the latest.
func goCall[T any](t testing.TB, fn func() (T, error)) <-chan result[T] {
	t.Helper()
	ch := make(chan result[T], 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	t.Cleanup(func() { <-done })
	return ch
}

// recv waits for a background call's result.
func recv[T any](t testing.TB, ch <-chan result[T]) (T, error) {
	t.Helper()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a background call")
	}
	var zero T
	return zero, nil
}

// notYet asserts that a background call has not returned.
func notYet[T any](t testing.TB, ch <-chan result[T], what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %+v, %v", what, r.v, r.err)
	default:
	}
}
