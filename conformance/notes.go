package conformance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testNotePutGetUpdate: Put creates then updates (Kind, Key), IfVersion
// guards it, the author stays, and other handles see it.
func testNotePutGetUpdate(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	n, err := ws1.Notes().Put(ctx, as("planner"), workspace.NotePut{Kind: "decision", Key: "auth", Title: "Use JWT", Body: "Because.\nReasons."})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n.Version)
	assert.Equal(t, "planner", n.Author)
	assert.Equal(t, "planner", n.UpdatedBy)

	got, err := ws2.Notes().Get(ctx, "decision", "auth")
	require.NoError(t, err)
	assert.Equal(t, "Use JWT", got.Title)
	assert.Equal(t, "Because.\nReasons.", got.Body)
	assert.Equal(t, int64(1), got.Version)
	assertSameTime(t, n.CreatedAt, got.CreatedAt, "CreatedAt")
	assertSameTime(t, n.UpdatedAt, got.UpdatedAt, "UpdatedAt")

	// The same key in another kind is another note.
	g, err := ws2.Notes().Put(ctx, as("writer"), workspace.NotePut{Kind: "glossary", Key: "auth", Title: "Authentication"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), g.Version)

	n2, err := ws2.Notes().Put(ctx, asAt("reviewer", 1), workspace.NotePut{Kind: "decision", Key: "auth", Title: "Use JWT", Body: "Revised."})
	require.NoError(t, err)
	assert.Equal(t, int64(2), n2.Version)
	assert.Equal(t, "planner", n2.Author, "the author is who wrote it first")
	assert.Equal(t, "reviewer", n2.UpdatedBy)
	assertSameTime(t, n.CreatedAt, n2.CreatedAt, "CreatedAt")

	before := headOf(t, ws1)
	_, err = ws1.Notes().Put(ctx, asAt("planner", 1), workspace.NotePut{Kind: "decision", Key: "auth", Title: "lost"})
	require.ErrorIs(t, err, workspace.ErrConflict)
	var ce *workspace.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(2), ce.Current)
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventConflict, evs[0].Type)
	assert.Equal(t, workspace.SubjectNote, evs[0].Subject.Kind)

	_, err = ws1.Notes().Put(ctx, asAt("planner", 1), workspace.NotePut{Kind: "constraint", Key: "new"})
	require.ErrorIs(t, err, workspace.ErrConflict, "IfVersion on a missing note")
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(0), ce.Current, "a missing note's current version is 0")
	_, err = ws1.Notes().Get(ctx, "constraint", "new")
	assert.ErrorIs(t, err, workspace.ErrNotFound)

	got, err = ws1.Notes().Get(ctx, "decision", "auth")
	require.NoError(t, err)
	assert.Equal(t, "Revised.", got.Body)
	assert.Equal(t, int64(2), got.Version)
	_, err = ws1.Notes().Get(ctx, "decision", "none")
	assert.ErrorIs(t, err, workspace.ErrNotFound)
}

// testNoteDelete: a deleted note is gone; IfVersion guards the delete.
func testNoteDelete(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	_, err := ws1.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "friction", Key: "slow-ci", Body: "20 min"})
	require.NoError(t, err)
	_, err = ws1.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "friction", Key: "slow-ci", Body: "25 min"})
	require.NoError(t, err)

	err = ws2.Notes().Delete(ctx, asAt("b", 1), "friction", "slow-ci")
	require.ErrorIs(t, err, workspace.ErrConflict)
	before := headOf(t, ws1)
	require.NoError(t, ws2.Notes().Delete(ctx, asAt("b", 2), "friction", "slow-ci"))
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventNoteDeleted, evs[0].Type)
	assert.Equal(t, "b", evs[0].Actor)

	_, err = ws1.Notes().Get(ctx, "friction", "slow-ci")
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	assert.ErrorIs(t, ws1.Notes().Delete(ctx, as("a"), "friction", "slow-ci"), workspace.ErrNotFound)
	page, err := ws1.Notes().List(ctx, workspace.NoteFilter{})
	require.NoError(t, err)
	assert.Empty(t, page.Notes)

	n, err := ws1.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "friction", Key: "slow-ci", Body: "fixed"})
	require.NoError(t, err, "a deleted key can be put again")
	assert.Equal(t, "a", n.Author)
}

// testNoteList: List orders by kind then key, filters by kind, and pages
// with a cursor without gaps or duplicates.
func testNoteList(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	var ops []workspace.Op
	want := map[string][]string{}
	var all []string
	for _, kind := range []string{"constraint", "decision", "glossary"} {
		for i := range 7 {
			key := fmt.Sprintf("k%02d", (i*3)%7)
			ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: kind, Key: key, Title: kind + " " + key}})
		}
		for i := range 7 {
			want[kind] = append(want[kind], fmt.Sprintf("k%02d", i))
			all = append(all, fmt.Sprintf("%s/k%02d", kind, i))
		}
	}
	_, err := ws.Commit(ctx, workspace.Batch{Actor: "w", Ops: ops})
	require.NoError(t, err)

	list := func(f workspace.NoteFilter) []string {
		var got []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "List does not end")
			page, err := ws2.Notes().List(ctx, f)
			require.NoError(t, err)
			for _, n := range page.Notes {
				got = append(got, n.Kind+"/"+n.Key)
				assert.Equal(t, n.Kind+" "+n.Key, n.Title)
			}
			if page.Next == "" {
				return got
			}
			f.After = page.Next
		}
	}
	for _, limit := range []int{0, 1, 3, 7, 100} {
		assert.Equal(t, all, list(workspace.NoteFilter{Limit: limit}), "every kind, limit %d", limit)
		for kind, keys := range want {
			var w []string
			for _, k := range keys {
				w = append(w, kind+"/"+k)
			}
			assert.Equal(t, w, list(workspace.NoteFilter{Kind: kind, Limit: limit}), "kind %s limit %d", kind, limit)
		}
	}
	assert.Empty(t, list(workspace.NoteFilter{Kind: "friction"}))
}
