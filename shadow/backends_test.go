package shadow

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// Change sets live in the workspace and promote as one engine batch, so
// their cases run on every store, as the backend contract suite does:
// SQLite, the json store and PostgreSQL (AGENTSPACE_TEST_POSTGRES, or the
// local server; see pgtest). A client of a server is not among them: the
// sets' records are reserved, written only where the store is.
var backends = []struct {
	name   string
	newDSN func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") + "?ws_poll=10ms" }},
	{"json", func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") + "?ws_poll=10ms" }},
	{"postgres", func(t *testing.T) string { return pgtest.NewDSN(t) }},
}

// onEveryBackend runs fn on a fresh workspace of each store, in parallel.
func onEveryBackend(t *testing.T, fn func(t *testing.T, dsn string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.newDSN(t))
		})
	}
}

// caseCtx bounds a case so a hung store fails it instead of the run.
func caseCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openDSN opens dsn for the rest of the test.
func openDSN(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(caseCtx(t), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func as(actor string) workspace.Write { return workspace.Write{Actor: actor} }

// stageAll begins set "cs" as alice over a, b, c (and d untouched) and
// stages an update of a, a delete of b, a rename of c to c2 and a create
// of e, then validates it.
func stageAll(t *testing.T, ws *workspace.Workspace) *ChangeSets {
	t.Helper()
	ctx := caseCtx(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		_, err := ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: n, Content: []byte(n + "1")})
		require.NoError(t, err)
	}
	sets := NewChangeSets(ws, Options{})
	_, err := sets.Begin(ctx, "cs", "alice", "")
	require.NoError(t, err)
	for _, r := range []StageRequest{
		{Op: OpUpdate, Name: "a", Content: []byte("a2")},
		{Op: OpDelete, Name: "b"},
		{Op: OpRename, Name: "c", NewName: "c2"},
		{Op: OpCreate, Name: "e", Content: []byte("e1")},
	} {
		_, err := sets.Stage(ctx, "cs", "alice", r)
		require.NoError(t, err, "%s %s", r.Op, r.Name)
	}
	v, err := sets.Validate(ctx, "cs", "alice")
	require.NoError(t, err)
	require.True(t, v.Passed, "%+v", v.Violations)
	return sets
}

// liveContents maps the live artifacts' names to their heads' content.
func liveContents(t *testing.T, ws *workspace.Workspace) map[string]string {
	t.Helper()
	ctx := caseCtx(t)
	page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, a := range page.Artifacts {
		full, err := ws.Artifacts().Get(ctx, workspace.ByID(a.ID))
		require.NoError(t, err)
		out[a.Name] = string(full.Content)
	}
	return out
}

// eventsAfter returns the events with seq > after.
func eventsAfter(t *testing.T, ws *workspace.Workspace, after int64) []workspace.Event {
	t.Helper()
	page, err := ws.Events().Read(caseCtx(t), workspace.EventQuery{AfterSeq: after, Limit: 1000})
	require.NoError(t, err)
	require.Less(t, len(page.Events), 1000, "more events than one page")
	return page.Events
}

func headOf(t *testing.T, ws *workspace.Workspace) int64 {
	t.Helper()
	h, err := ws.Events().Head(caseCtx(t))
	require.NoError(t, err)
	return h
}

// TestChangeSetConflictNamesTheArtifactsThatMoved: staged changes are
// invisible to reads; when another agent moves artifacts the set touches,
// promotion names exactly those and writes nothing but its record.
func TestChangeSetConflictNamesTheArtifactsThatMoved(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		ctx := caseCtx(t)
		ws, other := openDSN(t, dsn), openDSN(t, dsn)
		sets := stageAll(t, ws)
		assert.Equal(t, map[string]string{"a": "a1", "b": "b1", "c": "c1", "d": "d1"}, liveContents(t, other), "a change set is invisible to artifact reads")

		_, err := other.Artifacts().Update(ctx, as("bob"), workspace.ByName("a"), workspace.ArtifactChange{Content: []byte("bob")})
		require.NoError(t, err)
		_, err = other.Artifacts().Update(ctx, as("bob"), workspace.ByName("d"), workspace.ArtifactChange{Content: []byte("bob")})
		require.NoError(t, err)
		_, err = other.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "e", Content: []byte("bob")})
		require.NoError(t, err)
		want := map[string]string{"a": "bob", "b": "b1", "c": "c1", "d": "bob", "e": "bob"}
		head := headOf(t, ws)

		_, err = sets.Promote(ctx, "cs", "alice")
		var ce *ConflictError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, workspace.ErrConflict)
		assert.Equal(t, []string{"a", "e"}, ce.Paths, "d moved too, but the set does not touch it")
		assert.Equal(t, want, liveContents(t, other))
		evs := eventsAfter(t, ws, head)
		require.Len(t, evs, 1, "only the conflict's record: %v", evs)
		assert.Equal(t, workspace.EventNotePut, evs[0].Type)
		assert.Contains(t, evs[0].Message, EventCSConflict)

		require.NoError(t, sets.Discard(ctx, "cs", "alice"))
		_, err = sets.Promote(ctx, "cs", "alice")
		assert.ErrorIs(t, err, workspace.ErrInvalid, "a discarded set promotes nothing")
		assert.Equal(t, want, liveContents(t, other))
	})
}

// TestChangeSetPromotesAllOrNothing: a set promotes as one batch with
// consecutive seqs, its pins among them; when one of its writes fails at
// commit (a lease taken after the validation), none of them happens and
// the set stays open; a promotion needs a validation of the set as it is.
func TestChangeSetPromotesAllOrNothing(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		ctx := caseCtx(t)
		ws, other := openDSN(t, dsn), openDSN(t, dsn)
		sets := stageAll(t, ws)
		before := liveContents(t, other)

		lease, err := other.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: workspace.ArtifactResource("c"), Owner: "bob", TTL: time.Hour})
		require.NoError(t, err)
		head := headOf(t, ws)
		_, err = sets.Promote(ctx, "cs", "alice")
		assert.ErrorIs(t, err, workspace.ErrLocked)
		assert.Equal(t, before, liveContents(t, other), "nothing of the batch was written")
		for _, ev := range eventsAfter(t, ws, head) {
			assert.Equal(t, workspace.EventConflict, ev.Type, "a failed batch appends nothing but its conflict event")
		}
		require.NoError(t, other.Locks().Release(ctx, lease))
		pins, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: workspace.PinKind})
		require.NoError(t, err)
		assert.Empty(t, pins.Notes, "a failed promotion pins nothing")

		_, err = sets.Stage(ctx, "cs", "alice", StageRequest{Op: OpUpdate, Name: "a", Content: []byte("a3")})
		require.NoError(t, err)
		_, err = sets.Promote(ctx, "cs", "alice")
		assert.ErrorIs(t, err, ErrNotValidated, "staging again needs a new validation")
		v, err := sets.Validate(ctx, "cs", "alice")
		require.NoError(t, err)
		require.True(t, v.Passed)

		head = headOf(t, ws)
		res, err := sets.Promote(ctx, "cs", "alice")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "a3", "c2": "c1", "d": "d1", "e": "e1"}, liveContents(t, other))
		evs := eventsAfter(t, ws, head)
		require.Len(t, evs, len(res.Events))
		var pinEvents []string
		for i, ev := range evs {
			assert.Equal(t, head+int64(i)+1, ev.Seq, "one batch: consecutive seqs")
			if ev.Type == workspace.EventNotePut && ev.Subject.Kind == "note" && len(ev.Subject.ID) > 4 && ev.Subject.ID[:4] == workspace.PinKind+"/" {
				pinEvents = append(pinEvents, ev.Subject.ID)
			}
		}
		a, err := other.Artifacts().Get(ctx, workspace.ByName("a"))
		require.NoError(t, err)
		var created []string
		for _, n := range []string{"c2", "e"} {
			c, err := other.Artifacts().Get(ctx, workspace.ByName(n))
			require.NoError(t, err)
			created = append(created, workspace.PinKind+"/"+reserve.PinKey(c.ID, 1))
		}
		assert.ElementsMatch(t, append(created, workspace.PinKind+"/"+reserve.PinKey(a.ID, 2)), pinEvents,
			"the batch pins each version it writes: a v2, c2 v1, e v1")
		cs, err := sets.Get(ctx, "cs")
		require.NoError(t, err)
		assert.Equal(t, StatePromoted, cs.State)
		_, err = sets.Promote(ctx, "cs", "alice")
		assert.ErrorIs(t, err, workspace.ErrInvalid, "a set promotes once")
	})
}

// noPinsPolicy lets alice write artifacts and change sets but no pins.
const noPinsPolicy = `
[roles.writer]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read  = ["*"]
notes_write = ["changeset"]

[actors]
root  = ["admin"]
alice = ["writer"]
`

// applyPolicy writes src as the workspace's policy, by root.
func applyPolicy(t *testing.T, ws *workspace.Workspace, src string) {
	t.Helper()
	ctx := workspace.AsActor(caseCtx(t), "root")
	_, err := ws.Artifacts().Create(ctx, as("root"), workspace.NewArtifact{Name: workspace.PolicyArtifact, Kind: "policy", Content: []byte(src)})
	require.NoError(t, err)
}

// promoteAll begins set as alice, stages rs, validates and promotes.
func promoteAll(t *testing.T, sets *ChangeSets, set string, rs ...StageRequest) {
	t.Helper()
	ctx := caseCtx(t)
	_, err := sets.Begin(ctx, set, "alice", "")
	require.NoError(t, err)
	for _, r := range rs {
		_, err := sets.Stage(ctx, set, "alice", r)
		require.NoError(t, err, "%s %s", r.Op, r.Name)
	}
	v, err := sets.Validate(ctx, set, "alice")
	require.NoError(t, err)
	require.True(t, v.Passed, "%+v", v.Violations)
	_, err = sets.Promote(ctx, set, "alice")
	require.NoError(t, err)
}

// updateN writes n new versions of name as alice.
func updateN(t *testing.T, ws *workspace.Workspace, name string, n int) {
	t.Helper()
	for i := range n {
		_, err := ws.Artifacts().Update(caseCtx(t), as("alice"), workspace.ByName(name), workspace.ArtifactChange{Content: fmt.Appendf(nil, "%s later %d", name, i)})
		require.NoError(t, err)
	}
}

// versionsOf lists the versions of name the store still holds.
func versionsOf(t *testing.T, ws *workspace.Workspace, name string) []int64 {
	t.Helper()
	vs, err := ws.Artifacts().Versions(caseCtx(t), workspace.ByName(name))
	require.NoError(t, err)
	var out []int64
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

// TestChangeSetGCKeepsWhatAPromotionWrote: the versions a change set's
// promotions wrote survive gc down to each artifact's newest version,
// under a policy that forbids the promoter's pins, and so do those of an
// earlier promotion of a name begun again; the versions in between go.
// Unpin lets them go. gc reads no record of shadow's: only the pins the
// promoting batches wrote.
func TestChangeSetGCKeepsWhatAPromotionWrote(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		ctx := caseCtx(t)
		ws := openDSN(t, dsn)
		applyPolicy(t, ws, noPinsPolicy)
		for _, n := range []string{"a", "c"} {
			_, err := ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: n, Content: []byte(n + "1")})
			require.NoError(t, err)
		}
		sets := NewChangeSets(ws, Options{})
		// a v2, e v1 and c2 v1 are promoted; then newer versions are written.
		promoteAll(t, sets, "cs",
			StageRequest{Op: OpUpdate, Name: "a", Content: []byte("a promoted")},
			StageRequest{Op: OpCreate, Name: "e", Content: []byte("e promoted")},
			StageRequest{Op: OpRename, Name: "c", NewName: "c2"})
		_, err := ws.Pin(ctx, as("alice"), "a", 2)
		require.ErrorIs(t, err, workspace.ErrForbidden, "the policy forbids alice's pins")
		updateN(t, ws, "a", 3)
		updateN(t, ws, "e", 2)
		updateN(t, ws, "c2", 2)
		// The name begun again: a v6 is promoted, then a v7 written.
		promoteAll(t, sets, "cs", StageRequest{Op: OpUpdate, Name: "a", Content: []byte("a promoted again")})
		updateN(t, ws, "a", 1)

		root := workspace.AsActor(ctx, "root")
		r, err := ws.GC(root, workspace.GCPolicy{Actor: "root", KeepVersions: 1})
		require.NoError(t, err)
		assert.Equal(t, int64(4+1+1), r.Versions.Count, "a v1, v3-v5; e v2; c2 v2")
		want := map[string]map[int64]string{
			"a":  {2: "a promoted", 6: "a promoted again", 7: "a later 0"},
			"e":  {1: "e promoted", 3: "e later 1"},
			"c2": {1: "c1", 3: "c2 later 1"},
		}
		for name, vs := range want {
			assert.Len(t, versionsOf(t, ws, name), len(vs), "%s", name)
			for v, content := range vs {
				a, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: name, Version: v})
				if assert.NoError(t, err, "%s version %d", name, v) {
					assert.Equal(t, content, string(a.Content))
				}
			}
		}

		// Unpinning the set lets gc remove what it promoted, and the
		// upgrade step does not pin it again.
		removed, gone, err := sets.Unpin(root, "cs", "root")
		require.NoError(t, err)
		assert.Equal(t, 4, removed, "a v2, e v1, c2 v1, a v6")
		assert.Empty(t, gone)
		pr, err := sets.PinPromoted(root, "root")
		require.NoError(t, err)
		assert.Equal(t, PinReport{}, pr)
		r, err = ws.GC(root, workspace.GCPolicy{Actor: "root", KeepVersions: 1})
		require.NoError(t, err)
		assert.Equal(t, int64(4), r.Versions.Count)
		assert.Equal(t, []int64{7}, versionsOf(t, ws, "a"))
		assert.Equal(t, []int64{3}, versionsOf(t, ws, "e"))
		assert.Equal(t, []int64{3}, versionsOf(t, ws, "c2"))
	})
}

// TestChangeSetPinPromotedUpgradesOldRecords: a workspace whose sets were
// promoted before promotions pinned (their records list the versions, no
// pin exists) loses those versions to gc until PinPromoted pins them;
// then gc keeps them. A promoted version of a since-deleted artifact
// cannot be pinned and is reported; a second run pins nothing new.
func TestChangeSetPinPromotedUpgradesOldRecords(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, dsn string) {
		ctx := caseCtx(t)
		ws := openDSN(t, dsn)
		arts := ws.Artifacts()
		var promoted []PromotedVersion
		// a v2 was an update's, n v1 a create's, gone v1 a create's of an
		// artifact deleted since, as the old promotion recorded them.
		for _, n := range []string{"a", "n", "gone"} {
			c, err := arts.Create(ctx, as("alice"), workspace.NewArtifact{Name: n, Content: []byte(n + "1")})
			require.NoError(t, err)
			if n != "a" {
				promoted = append(promoted, PromotedVersion{Name: n, Version: 1, SHA256: c.SHA256})
			}
		}
		a2, err := arts.Update(ctx, as("alice"), workspace.ByName("a"), workspace.ArtifactChange{Content: []byte("a promoted")})
		require.NoError(t, err)
		promoted = append(promoted, PromotedVersion{ID: a2.ID, Name: "a", Version: 2, SHA256: a2.SHA256})
		require.NoError(t, arts.Delete(ctx, as("alice"), workspace.ByName("gone")))
		old := ChangeSet{Name: "old", Actor: "alice", State: StatePromoted, CreatedAt: time.Now().UTC(), Promoted: promoted}
		_, err = ws.Notes().Put(changeSetKey.Grant(ctx), as("alice"), csNote(old))
		require.NoError(t, err)
		updateN(t, ws, "a", 2)
		updateN(t, ws, "n", 2)

		sets := NewChangeSets(ws, Options{})
		r, err := sets.PinPromoted(ctx, "root")
		require.NoError(t, err)
		assert.Equal(t, 2, r.Pinned, "a v2 and n v1")
		assert.Zero(t, r.Already)
		require.Len(t, r.Gone, 1)
		assert.Equal(t, "gone", r.Gone[0].Name)

		g, err := ws.GC(ctx, workspace.GCPolicy{Actor: "root", KeepVersions: 1})
		require.NoError(t, err)
		assert.Equal(t, int64(2+1), g.Versions.Count, "a v1, v3; n v2 (gone's only version stands for its head)")
		assert.Equal(t, []int64{2, 4}, versionsOf(t, ws, "a"))
		assert.Equal(t, []int64{1, 3}, versionsOf(t, ws, "n"))

		r, err = sets.PinPromoted(ctx, "root")
		require.NoError(t, err)
		assert.Equal(t, PinReport{Already: 2, Gone: r.Gone}, r, "a second run pins nothing new")
	})
}
