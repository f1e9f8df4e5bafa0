package conformance

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/mediatype"
	"github.com/agentspace/agentspace/workspace"
)

// testArtifactCreateGetUpdate: create is version 1 with the writer as owner,
// every change is +1, every version stays readable, and a second handle sees
// what the first wrote.
func testArtifactCreateGetUpdate(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	content := []byte("# Auth API\n")
	a, err := ws1.Artifacts().Create(ctx, as("planner"), workspace.NewArtifact{
		Name: "plans/auth-api.md", Kind: "plan", Content: content,
		ContentType: "text/markdown", Labels: map[string]string{"area": "auth"},
	})
	require.NoError(t, err)
	assert.Len(t, a.ID, 36, "ID is a UUID")
	assert.Equal(t, byte('7'), a.ID[14], "ID is a UUIDv7: %s", a.ID)
	assert.Equal(t, int64(1), a.Version)
	assert.Equal(t, "plans/auth-api.md", a.Name)
	assert.Equal(t, "plan", a.Kind)
	assert.Equal(t, "planner", a.Owner)
	assert.Equal(t, "planner", a.CreatedBy)
	assert.Equal(t, "planner", a.UpdatedBy)
	assert.Equal(t, "text/markdown", a.ContentType)
	assert.Equal(t, sha(content), a.SHA256)
	assert.Equal(t, int64(len(content)), a.Size)
	assert.Nil(t, a.Content, "writes return metadata only")
	assert.False(t, a.CreatedAt.IsZero())
	assert.True(t, a.CreatedAt.Equal(a.UpdatedAt))

	for _, ref := range []workspace.ArtifactRef{workspace.ByName(a.Name), workspace.ByID(a.ID)} {
		got, err := ws2.Artifacts().Get(ctx, ref)
		require.NoError(t, err, "get %+v from another handle", ref)
		requireSameArtifactMeta(t, a, got)
		assert.Equal(t, content, got.Content)
	}

	// A content change from the other handle.
	v2content := []byte("# Auth API\n\nTokens.\n")
	v2, err := ws2.Artifacts().Update(ctx, asAt("worker", 1), workspace.ByName(a.Name), workspace.ArtifactChange{Content: v2content})
	require.NoError(t, err)
	assert.Equal(t, a.ID, v2.ID)
	assert.Equal(t, int64(2), v2.Version)
	assert.Equal(t, "planner", v2.Owner, "an update keeps the owner")
	assert.Equal(t, "planner", v2.CreatedBy)
	assertSameTime(t, a.CreatedAt, v2.CreatedAt, "CreatedAt")
	assert.Equal(t, "worker", v2.UpdatedBy)
	assert.False(t, v2.UpdatedAt.Before(a.UpdatedAt))
	assert.Equal(t, sha(v2content), v2.SHA256)
	assert.Equal(t, "plan", v2.Kind, "unchanged fields stay")
	assert.Equal(t, map[string]string{"area": "auth"}, v2.Labels)

	// A metadata-only change by ID keeps the content.
	v3, err := ws1.Artifacts().Update(ctx, asAt("reviewer", 2), workspace.ByID(a.ID), workspace.ArtifactChange{
		Kind: ptr("design"), ContentType: ptr("text/plain"), Owner: ptr("reviewer"),
		Labels: map[string]string{"status": "approved"},
	})
	require.NoError(t, err)
	assert.Equal(t, int64(3), v3.Version)
	assert.Equal(t, "design", v3.Kind)
	assert.Equal(t, "text/plain", v3.ContentType)
	assert.Equal(t, "reviewer", v3.Owner)
	assert.Equal(t, map[string]string{"status": "approved"}, v3.Labels, "labels are replaced")
	assert.Equal(t, v2.SHA256, v3.SHA256)

	head, err := ws2.Artifacts().Get(ctx, workspace.ByName(a.Name))
	require.NoError(t, err)
	requireSameArtifactMeta(t, v3, head)
	assert.Equal(t, v2content, head.Content)

	vs, err := ws2.Artifacts().Versions(ctx, workspace.ByName(a.Name))
	require.NoError(t, err)
	require.Len(t, vs, 3)
	for i, want := range []workspace.Artifact{a, v2, v3} {
		requireSameArtifactMeta(t, want, vs[i])
		assert.Nil(t, vs[i].Content, "Versions is metadata only")
	}
	vsByID, err := ws1.Artifacts().Versions(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Len(t, vsByID, 3)

	for v, want := range map[int64][]byte{1: content, 2: v2content, 3: v2content} {
		for _, ref := range []workspace.ArtifactRef{{Name: a.Name, Version: v}, {ID: a.ID, Version: v}} {
			got, err := ws1.Artifacts().Get(ctx, ref)
			require.NoError(t, err, "get %+v", ref)
			assert.Equal(t, v, got.Version)
			assert.Equal(t, want, got.Content, "version %d", v)
		}
	}

	for _, ref := range []workspace.ArtifactRef{
		{Name: a.Name, Version: 4},
		{ID: a.ID, Version: 99},
		workspace.ByName("plans/none.md"),
		workspace.ByID("01900000-0000-7000-8000-000000000000"),
	} {
		_, err := ws1.Artifacts().Get(ctx, ref)
		assert.ErrorIs(t, err, workspace.ErrNotFound, "get %+v", ref)
	}
	_, err = ws1.Artifacts().Versions(ctx, workspace.ByName("plans/none.md"))
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	_, err = ws1.Artifacts().Create(ctx, as("planner"), workspace.NewArtifact{Name: "orphan", TaskID: "01900000-0000-7000-8000-000000000000"})
	assert.ErrorIs(t, err, workspace.ErrNotFound, "an artifact's task must exist")

	// Defaults, and an empty label map clearing the labels.
	d, err := ws2.Artifacts().Create(ctx, as("planner"), workspace.NewArtifact{Name: "defaults", Labels: map[string]string{"a": "b"}})
	require.NoError(t, err)
	assert.Equal(t, "output", d.Kind, "the default kind")
	assert.Equal(t, mediatype.For("defaults", nil), d.ContentType, "the default content type is inferred")
	for name, want := range map[string]string{"inferred/plan.md": "text/markdown; charset=utf-8", "inferred/blob": "application/octet-stream"} {
		a, err := ws2.Artifacts().Create(ctx, as("planner"), workspace.NewArtifact{Name: name, Content: []byte{0xff, 0x00}})
		require.NoError(t, err)
		assert.Equal(t, want, a.ContentType, "%s: by its name, else by its content", name)
	}
	assert.Equal(t, int64(0), d.Size)
	assert.Equal(t, sha(nil), d.SHA256)
	_, err = ws1.Artifacts().Update(ctx, as("planner"), workspace.ByName("defaults"), workspace.ArtifactChange{Labels: map[string]string{}})
	require.NoError(t, err)
	cleared, err := ws2.Artifacts().Get(ctx, workspace.ByName("defaults"))
	require.NoError(t, err)
	assert.Empty(t, cleared.Labels, "a non-nil empty label map replaces the labels with none")
	assert.Equal(t, int64(2), cleared.Version)
	_, err = ws1.Artifacts().Update(ctx, as("worker"), workspace.ByName("plans/none.md"), workspace.ArtifactChange{Content: []byte("x")})
	assert.ErrorIs(t, err, workspace.ErrNotFound)
}

// testArtifactRollback: a rollback is a new head with the old version's
// content; the versions in between stay.
func testArtifactRollback(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	arts := ws.Artifacts()
	a, err := arts.Create(ctx, as("a"), workspace.NewArtifact{Name: "code/x.go", Kind: "code", Content: []byte("one")})
	require.NoError(t, err)
	_, err = arts.Update(ctx, as("a"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("two"), Kind: ptr("review")})
	require.NoError(t, err)
	_, err = arts.Update(ctx, as("b"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("three")})
	require.NoError(t, err)
	before := headOf(t, ws)

	r, err := ws2.Artifacts().Rollback(ctx, asAt("c", 3), workspace.ByName("code/x.go"), 1)
	require.NoError(t, err)
	assert.Equal(t, int64(4), r.Version)
	assert.Equal(t, a.ID, r.ID)
	assert.Equal(t, a.SHA256, r.SHA256)
	assert.Equal(t, "code", r.Kind, "rollback restores the metadata too")
	assert.Equal(t, "c", r.UpdatedBy)

	got, err := arts.Get(ctx, workspace.ByName("code/x.go"))
	require.NoError(t, err)
	assert.Equal(t, int64(4), got.Version)
	assert.Equal(t, []byte("one"), got.Content)
	for v, want := range map[int64]string{1: "one", 2: "two", 3: "three", 4: "one"} {
		old, err := arts.Get(ctx, workspace.ArtifactRef{ID: a.ID, Version: v})
		require.NoError(t, err)
		assert.Equal(t, want, string(old.Content), "history is intact: version %d", v)
	}
	vs, err := arts.Versions(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Len(t, vs, 4)

	evs := eventsAfter(t, ws, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventArtifactRolledBack, evs[0].Type)
	assert.Equal(t, int64(4), evs[0].Version)
	assert.Equal(t, "c", evs[0].Actor)

	cases := []struct {
		name    string
		w       workspace.Write
		to      int64
		wantErr error
	}{
		{"to the head", as("c"), 4, workspace.ErrInvalid},
		{"past the head", as("c"), 9, workspace.ErrInvalid},
		{"to zero", as("c"), 0, workspace.ErrInvalid},
		{"stale IfVersion", asAt("c", 3), 2, workspace.ErrConflict},
	}
	for _, c := range cases {
		_, err := arts.Rollback(ctx, c.w, workspace.ByID(a.ID), c.to)
		assert.ErrorIs(t, err, c.wantErr, c.name)
	}
	got, err = arts.Get(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(4), got.Version, "failed rollbacks write nothing")
}

// testArtifactContentRoundTrips: content comes back byte for byte, whatever
// the bytes, from another handle, and the caller's buffer is not kept.
func testArtifactContentRoundTrips(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)

	all := make([]byte, 0, 512)
	for i := range 512 {
		all = append(all, byte(i))
	}
	big := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2)) // #nosec G404 -- a fixed seed for reproducible test content
	for i := range big {
		big[i] = byte(rng.UintN(256))
	}
	cases := []struct {
		name    string
		content []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"every byte value", all},
		{"NULs and line endings", []byte("a\x00b\r\nc\n\x00")},
		{"invalid UTF-8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x80}},
		{"one MiB", big},
	}
	for i, c := range cases {
		name := fmt.Sprintf("blobs/%d.bin", i)
		buf := bytes.Clone(c.content)
		a, err := ws.Artifacts().Create(ctx, as("w"), workspace.NewArtifact{Name: name, Content: buf})
		require.NoError(t, err, c.name)
		for j := range buf {
			buf[j] ^= 0xff // the store must have copied it
		}
		assert.Equal(t, int64(len(c.content)), a.Size, c.name)
		assert.Equal(t, sha(c.content), a.SHA256, c.name)
		got, err := ws2.Artifacts().Get(ctx, workspace.ByName(name))
		require.NoError(t, err, c.name)
		assert.NotNil(t, got.Content, "%s: Get returns content, empty or not", c.name)
		assert.True(t, bytes.Equal(c.content, got.Content), "%s: content differs (len %d, want %d)", c.name, len(got.Content), len(c.content))
		assert.Equal(t, sha(c.content), got.SHA256, c.name)
		for j := range got.Content {
			got.Content[j] ^= 0xff // nor may it hand out its own copy
		}
		got, err = ws2.Artifacts().Get(ctx, workspace.ByName(name))
		require.NoError(t, err, c.name)
		assert.True(t, bytes.Equal(c.content, got.Content), "%s: content changed by a caller's edit of a read", c.name)

		// The same bytes as a later version, over different content.
		_, err = ws.Artifacts().Update(ctx, as("w"), workspace.ByName(name), workspace.ArtifactChange{Content: []byte("between")})
		require.NoError(t, err)
		again := bytes.Clone(c.content)
		if again == nil {
			again = []byte{} // nil Content means "unchanged" in an update
		}
		_, err = ws.Artifacts().Update(ctx, as("w"), workspace.ByName(name), workspace.ArtifactChange{Content: again})
		require.NoError(t, err)
		got, err = ws2.Artifacts().Get(ctx, workspace.ByName(name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(c.content, got.Content), "%s: head content differs", c.name)
		v2, err := ws2.Artifacts().Get(ctx, workspace.ArtifactRef{Name: name, Version: 2})
		require.NoError(t, err)
		assert.Equal(t, "between", string(v2.Content))
	}
}

// testArtifactNameUnique: one live artifact per name, across handles; a
// refused create writes nothing.
func testArtifactNameUnique(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	_, err := ws1.Artifacts().Create(ctx, as("a"), workspace.NewArtifact{Name: "out/report.txt", Content: []byte("a")})
	require.NoError(t, err)
	before := snap(t, ws1)

	_, err = ws2.Artifacts().Create(ctx, as("b"), workspace.NewArtifact{Name: "out/report.txt", Content: []byte("b")})
	require.ErrorIs(t, err, workspace.ErrAlreadyExists)
	assert.Equal(t, before, snap(t, ws2), "a refused create writes nothing, not even an event")

	// Names are exact: case and prefixes make different names.
	for _, name := range []string{"out/Report.txt", "out/report.txt.bak", "out/report"} {
		_, err := ws2.Artifacts().Create(ctx, as("b"), workspace.NewArtifact{Name: name, Content: []byte("b")})
		assert.NoError(t, err, name)
	}
	got, err := ws1.Artifacts().Get(ctx, workspace.ByName("out/report.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a", string(got.Content))
}

// testArtifactDelete: a delete frees the name, and the deleted artifact's
// versions stay readable by ID and version.
func testArtifactDelete(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	arts := ws1.Artifacts()
	old, err := arts.Create(ctx, as("a"), workspace.NewArtifact{Name: "d/x", Content: []byte("old1")})
	require.NoError(t, err)
	_, err = arts.Update(ctx, as("a"), workspace.ByID(old.ID), workspace.ArtifactChange{Content: []byte("old2")})
	require.NoError(t, err)

	err = ws2.Artifacts().Delete(ctx, asAt("b", 1), workspace.ByName("d/x"))
	require.ErrorIs(t, err, workspace.ErrConflict, "delete honours IfVersion")
	before := headOf(t, ws1)
	require.NoError(t, ws2.Artifacts().Delete(ctx, asAt("b", 2), workspace.ByName("d/x")))
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventArtifactDeleted, evs[0].Type)
	assert.Equal(t, old.ID, evs[0].Subject.ID)

	_, err = arts.Get(ctx, workspace.ByName("d/x"))
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	err = arts.Delete(ctx, as("a"), workspace.ByName("d/x"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "deleting twice")
	_, err = arts.Update(ctx, as("a"), workspace.ByID(old.ID), workspace.ArtifactChange{Content: []byte("z")})
	assert.ErrorIs(t, err, workspace.ErrNotFound, "updating a deleted artifact")
	page, err := arts.List(ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	assert.Empty(t, page.Artifacts, "deleted artifacts are not listed")

	for v, want := range map[int64]string{1: "old1", 2: "old2"} {
		got, err := ws2.Artifacts().Get(ctx, workspace.ArtifactRef{ID: old.ID, Version: v})
		require.NoError(t, err, "version %d of a deleted artifact", v)
		assert.Equal(t, want, string(got.Content))
	}
	vs, err := ws2.Artifacts().Versions(ctx, workspace.ByID(old.ID))
	require.NoError(t, err)
	assert.Len(t, vs, 2)

	fresh2, err := ws2.Artifacts().Create(ctx, as("b"), workspace.NewArtifact{Name: "d/x", Content: []byte("new")})
	require.NoError(t, err, "the name is free again")
	assert.NotEqual(t, old.ID, fresh2.ID)
	assert.Equal(t, int64(1), fresh2.Version)
	got, err := arts.Get(ctx, workspace.ByName("d/x"))
	require.NoError(t, err)
	assert.Equal(t, "new", string(got.Content))
	got, err = arts.Get(ctx, workspace.ArtifactRef{ID: old.ID, Version: 1})
	require.NoError(t, err)
	assert.Equal(t, "old1", string(got.Content), "the old artifact's history is its own")
	vs, err = ws1.Artifacts().Versions(ctx, workspace.ByName("d/x"))
	require.NoError(t, err)
	require.Len(t, vs, 1, "by name, the live artifact's versions")
	assert.Equal(t, fresh2.ID, vs[0].ID)
	_, err = ws1.Artifacts().Rollback(ctx, as("a"), workspace.ByID(old.ID), 1)
	assert.ErrorIs(t, err, workspace.ErrNotFound, "a deleted artifact cannot be rolled back")
}

// testArtifactIfVersionConflict: a stale IfVersion fails with the current
// version, changes nothing, and is logged as a conflict event.
func testArtifactIfVersionConflict(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	a, err := ws1.Artifacts().Create(ctx, as("a"), workspace.NewArtifact{Name: "c/x", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws1.Artifacts().Update(ctx, asAt("a", 1), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)

	ops := []struct {
		name string
		do   func(w workspace.Write) error
	}{
		{"update", func(w workspace.Write) error {
			_, err := ws2.Artifacts().Update(ctx, w, workspace.ByName("c/x"), workspace.ArtifactChange{Content: []byte("lost")})
			return err
		}},
		{"delete", func(w workspace.Write) error { return ws2.Artifacts().Delete(ctx, w, workspace.ByID(a.ID)) }},
		{"rollback", func(w workspace.Write) error {
			_, err := ws2.Artifacts().Rollback(ctx, w, workspace.ByName("c/x"), 1)
			return err
		}},
	}
	for _, op := range ops {
		for _, stale := range []int64{1, 3} {
			before := headOf(t, ws1)
			err := op.do(workspace.Write{Actor: "b", IfVersion: stale, Message: "racing"})
			require.ErrorIs(t, err, workspace.ErrConflict, "%s at %d", op.name, stale)
			var ce *workspace.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, int64(2), ce.Current, "the error carries the current version")
			assert.Equal(t, stale, ce.Expected)
			assert.Equal(t, a.ID, ce.Subject.ID)

			evs := eventsAfter(t, ws1, before)
			require.Len(t, evs, 1, "%s: only the conflict event is written", op.name)
			assert.Equal(t, workspace.EventConflict, evs[0].Type)
			assert.Equal(t, "b", evs[0].Actor)
			assert.Equal(t, workspace.SubjectArtifact, evs[0].Subject.Kind)
			assert.Equal(t, a.ID, evs[0].Subject.ID)
			assert.Equal(t, int64(2), evs[0].Version)
		}
	}
	got, err := ws1.Artifacts().Get(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Version)
	assert.Equal(t, "v2", string(got.Content))

	up, err := ws2.Artifacts().Update(ctx, asAt("b", 2), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v3")})
	require.NoError(t, err, "the right version wins")
	assert.Equal(t, int64(3), up.Version)
}

// testArtifactIdenticalContent: writing the same bytes again is a new
// version like any other; deduplication is invisible.
func testArtifactIdenticalContent(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	contents := []string{"A", "A", "B", "A", "A"}
	a, err := ws.Artifacts().Create(ctx, as("w"), workspace.NewArtifact{Name: "same", Content: []byte(contents[0])})
	require.NoError(t, err)
	for i, c := range contents[1:] {
		v, err := ws.Artifacts().Update(ctx, asAt("w", int64(i+1)), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte(c)})
		require.NoError(t, err)
		assert.Equal(t, int64(i+2), v.Version)
		assert.Equal(t, sha([]byte(c)), v.SHA256)
	}
	vs, err := ws2.Artifacts().Versions(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	require.Len(t, vs, len(contents))
	for i, c := range contents {
		assert.Equal(t, sha([]byte(c)), vs[i].SHA256)
		got, err := ws2.Artifacts().Get(ctx, workspace.ArtifactRef{ID: a.ID, Version: int64(i + 1)})
		require.NoError(t, err)
		assert.Equal(t, c, string(got.Content), "version %d", i+1)
	}
	// Another artifact with the same bytes is independent of this one.
	b, err := ws.Artifacts().Create(ctx, as("w"), workspace.NewArtifact{Name: "other", Content: []byte("A")})
	require.NoError(t, err)
	require.NoError(t, ws.Artifacts().Delete(ctx, as("w"), workspace.ByID(a.ID)))
	got, err := ws2.Artifacts().Get(ctx, workspace.ByID(b.ID))
	require.NoError(t, err)
	assert.Equal(t, "A", string(got.Content))
}

// testArtifactListFilters: each filter selects exactly the matching live
// artifacts, ordered by name, without content.
func testArtifactListFilters(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	task, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "build"})
	require.NoError(t, err)
	seed := []struct {
		actor string
		a     workspace.NewArtifact
	}{
		{"planner", workspace.NewArtifact{Name: "plans/b.md", Kind: "plan", Labels: map[string]string{"area": "auth"}}},
		{"planner", workspace.NewArtifact{Name: "plans/a.md", Kind: "plan", Labels: map[string]string{"area": "db", "tier": "1"}}},
		{"coder", workspace.NewArtifact{Name: "src/api.go", Kind: "code", Labels: map[string]string{"area": "auth", "tier": "1"}, TaskID: task.ID}},
		{"coder", workspace.NewArtifact{Name: "src/db.go", Kind: "code", TaskID: task.ID}},
		{"reviewer", workspace.NewArtifact{Name: "reviews/api.md", Kind: "review", Labels: map[string]string{"area": "auth"}}},
		{"coder", workspace.NewArtifact{Name: "plansX", Kind: "plan"}},
		{"coder", workspace.NewArtifact{Name: "gone.txt", Kind: "plan"}},
	}
	for _, s := range seed {
		s.a.Content = []byte("content of " + s.a.Name)
		_, err := ws.Artifacts().Create(ctx, as(s.actor), s.a)
		require.NoError(t, err)
	}
	require.NoError(t, ws.Artifacts().Delete(ctx, as("coder"), workspace.ByName("gone.txt")))

	cases := []struct {
		name string
		f    workspace.ArtifactFilter
		want []string
	}{
		{"everything", workspace.ArtifactFilter{}, []string{"plans/a.md", "plans/b.md", "plansX", "reviews/api.md", "src/api.go", "src/db.go"}},
		{"kind", workspace.ArtifactFilter{Kind: "plan"}, []string{"plans/a.md", "plans/b.md", "plansX"}},
		{"owner", workspace.ArtifactFilter{Owner: "coder"}, []string{"plansX", "src/api.go", "src/db.go"}},
		{"prefix", workspace.ArtifactFilter{NamePrefix: "plans/"}, []string{"plans/a.md", "plans/b.md"}},
		{"prefix without slash", workspace.ArtifactFilter{NamePrefix: "plans"}, []string{"plans/a.md", "plans/b.md", "plansX"}},
		{"label", workspace.ArtifactFilter{Labels: map[string]string{"area": "auth"}}, []string{"plans/b.md", "reviews/api.md", "src/api.go"}},
		{"two labels", workspace.ArtifactFilter{Labels: map[string]string{"area": "auth", "tier": "1"}}, []string{"src/api.go"}},
		{"task", workspace.ArtifactFilter{TaskID: task.ID}, []string{"src/api.go", "src/db.go"}},
		{"kind and owner", workspace.ArtifactFilter{Kind: "plan", Owner: "planner"}, []string{"plans/a.md", "plans/b.md"}},
		{"no match", workspace.ArtifactFilter{Kind: "test"}, nil},
		{"prefix matches nothing", workspace.ArtifactFilter{NamePrefix: "zzz"}, nil},
	}
	for _, c := range cases {
		page, err := ws2.Artifacts().List(ctx, c.f)
		require.NoError(t, err, c.name)
		var names []string
		for _, a := range page.Artifacts {
			names = append(names, a.Name)
			assert.Nil(t, a.Content, "%s: List is metadata only", c.name)
			assert.Equal(t, sha([]byte("content of "+a.Name)), a.SHA256, c.name)
			assert.Equal(t, int64(len("content of "+a.Name)), a.Size, c.name)
		}
		assert.Equal(t, c.want, names, c.name)
		assert.Empty(t, page.Next, "%s: a short page is the last", c.name)
	}
}

// testArtifactListPagination: following Next visits every artifact once, in
// order, for several page sizes and with a filter.
func testArtifactListPagination(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	var ops []workspace.Op
	var all, odd []string
	for i := range 23 {
		name := fmt.Sprintf("p/%02d", (i*7)%23) // created out of order
		kind := "even"
		if (i*7)%23%2 == 1 {
			kind = "odd"
		}
		ops = append(ops, workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Kind: kind}})
	}
	for i := range 23 {
		name := fmt.Sprintf("p/%02d", i)
		all = append(all, name)
		if i%2 == 1 {
			odd = append(odd, name)
		}
	}
	_, err := ws.Commit(ctx, workspace.Batch{Actor: "w", Ops: ops})
	require.NoError(t, err)

	for _, c := range []struct {
		limit int
		kind  string
		want  []string
	}{{1, "", all}, {5, "", all}, {23, "", all}, {100, "", all}, {4, "odd", odd}, {11, "odd", odd}} {
		var got []string
		f := workspace.ArtifactFilter{Limit: c.limit, Kind: c.kind}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "List does not end")
			page, err := ws2.Artifacts().List(ctx, f)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(page.Artifacts), c.limit)
			for _, a := range page.Artifacts {
				got = append(got, a.Name)
			}
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
		assert.Equal(t, c.want, got, "limit %d kind %q", c.limit, c.kind)
	}
}

// testArtifactSizeLimit: content over ws_max_artifact_size is ErrTooLarge,
// in a create, an update and a batch, and nothing is written.
func testArtifactSizeLimit(t *testing.T, h Harness) {
	ctx := testCtx(t)
	ws := open(t, dsnWith(h.NewDSN(t), "ws_max_artifact_size", "1024"))
	ok := bytes.Repeat([]byte{'x'}, 1024)
	over := bytes.Repeat([]byte{'x'}, 1025)
	a, err := ws.Artifacts().Create(ctx, as("w"), workspace.NewArtifact{Name: "at-limit", Content: ok})
	require.NoError(t, err, "exactly the limit is allowed")
	before := snap(t, ws)

	_, err = ws.Artifacts().Create(ctx, as("w"), workspace.NewArtifact{Name: "over", Content: over})
	assert.ErrorIs(t, err, workspace.ErrTooLarge)
	_, err = ws.Artifacts().Update(ctx, as("w"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: over})
	assert.ErrorIs(t, err, workspace.ErrTooLarge)
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "w", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "small", Content: []byte("s")}},
		workspace.UpdateArtifactOp{Ref: workspace.ByID(a.ID), Change: workspace.ArtifactChange{Content: over}},
	}})
	assert.ErrorIs(t, err, workspace.ErrTooLarge)
	var be *workspace.BatchError
	if assert.ErrorAs(t, err, &be) {
		assert.Equal(t, 1, be.Index)
	}
	assert.Equal(t, before, snap(t, ws), "nothing is written")
	got, err := ws.Artifacts().Get(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Version)
}

// testArtifactNamesAreExact: names, labels and text with characters that
// mean something to SQL, to a file system or to a shell are stored and
// matched exactly; List orders by byte order, and a prefix is literal.
func testArtifactNamesAreExact(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	names := []string{
		"100%/done", "100x/not", "a_b/x", "aXb/y", "Zeta", "alpha", "Beta", "ärger/ü.md", "日本/計画.md",
		"with space/file name.txt", "quote'and\"double", "semi;colon", "a..b/c", ".hidden/.env", "dash-/x",
		"star*/q?", "back`tick$(x)", "emoji/🚀", "UPPER/lower", "upper/LOWER",
		strings.Repeat("seg/", 200) + strings.Repeat("x", workspace.MaxNameLen-800),
	}
	labels := map[string]string{"k=v": "a,b;c", "ключ": "значение", "'": "\""}
	var ops []workspace.Op
	for _, n := range names {
		ops = append(ops, workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: n, Content: []byte(n), Labels: labels}})
	}
	_, err := ws.Commit(ctx, workspace.Batch{Actor: "agent/7 (ü)", Ops: ops})
	require.NoError(t, err)

	for _, n := range names {
		got, err := ws2.Artifacts().Get(ctx, workspace.ByName(n))
		require.NoError(t, err, "%q", n)
		assert.Equal(t, n, got.Name)
		assert.Equal(t, n, string(got.Content))
		assert.Equal(t, labels, got.Labels)
		assert.Equal(t, "agent/7 (ü)", got.Owner)
	}
	_, err = ws2.Artifacts().Get(ctx, workspace.ByName("upper/lower"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "names are case-sensitive")
	_, err = ws2.Artifacts().Get(ctx, workspace.ByName("a%b/x"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "no wildcards in names")

	sorted := slices.Clone(names)
	slices.Sort(sorted)
	list := func(f workspace.ArtifactFilter) []string {
		var out []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100)
			page, err := ws2.Artifacts().List(ctx, f)
			require.NoError(t, err)
			for _, a := range page.Artifacts {
				out = append(out, a.Name)
			}
			if page.Next == "" {
				return out
			}
			f.After = page.Next
		}
	}
	assert.Equal(t, sorted, list(workspace.ArtifactFilter{}), "ordered by bytes, not by a locale")
	assert.Equal(t, sorted, list(workspace.ArtifactFilter{Limit: 4}), "pages follow the same order")
	for prefix, want := range map[string][]string{
		"100%":   {"100%/done"},
		"a_b":    {"a_b/x"},
		"a_":     {"a_b/x"},
		"upper":  {"upper/LOWER"},
		"UPPER":  {"UPPER/lower"},
		"日本/":    {"日本/計画.md"},
		"star*":  {"star*/q?"},
		"quote'": {"quote'and\"double"},
	} {
		assert.Equal(t, want, list(workspace.ArtifactFilter{NamePrefix: prefix}), "prefix %q is literal", prefix)
	}
	assert.Len(t, list(workspace.ArtifactFilter{Labels: map[string]string{"k=v": "a,b;c"}}), len(names))
	assert.Empty(t, list(workspace.ArtifactFilter{Labels: map[string]string{"k=v": "a,b"}}), "label values match exactly")
	assert.Len(t, list(workspace.ArtifactFilter{Owner: "agent/7 (ü)"}), len(names))

	evs := readAll(t, ws2, workspace.EventQuery{SubjectName: "a_b/x"})
	require.Len(t, evs, 1, "subject names match exactly")
	assert.Equal(t, "a_b/x", evs[0].Subject.Name)
}
