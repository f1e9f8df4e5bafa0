package shadow

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// observerPolicy is docs/policy.md's observer narrowed to public/**: it
// reads every note kind, and artifacts only under public/.
const observerPolicy = `
default_role = "observer"

[roles.observer]
artifacts_read = ["public/**"]
notes_read     = ["*"]

[actors]
root = ["admin"]
`

// TestChangeSetRecordIsReadOnlyByWhoMayReadItsArtifacts: a set staging
// secret/k.txt is refused to the observer (get) and left out of its
// listing, open and after promotion, while a set of public/ names and a
// discarded set (which names nothing) are read; the promoted and discarded
// records hold no content.
func TestChangeSetRecordIsReadOnlyByWhoMayReadItsArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(observerPolicy)})
	require.NoError(t, err)

	const secret = "the-secret-content"
	sets := NewChangeSets(ws, Options{})
	stage := func(set string, names ...string) {
		t.Helper()
		_, err := sets.Begin(ctx, set, "root", "")
		require.NoError(t, err)
		for _, n := range names {
			_, err = sets.Stage(ctx, set, "root", StageRequest{Op: OpCreate, Name: n, Content: []byte(secret + " in " + n)})
			require.NoError(t, err)
		}
	}
	stage("open-secret", "public/a.txt", "secret/k.txt")
	stage("promoted-secret", "secret/p.txt")
	stage("discarded-secret", "secret/d.txt")
	stage("open-public", "public/b.txt")
	for _, set := range []string{"promoted-secret"} {
		_, err = sets.Validate(ctx, set, "root")
		require.NoError(t, err)
		_, err = sets.Promote(ctx, set, "root")
		require.NoError(t, err)
	}
	require.NoError(t, sets.Discard(ctx, "discarded-secret", "root"))

	// What the store keeps: only the open sets hold content.
	for set, holds := range map[string]bool{"open-secret": true, "promoted-secret": false, "discarded-secret": false, "open-public": true} {
		n, err := ws.Notes().Get(ctx, ChangeSetKind, set)
		require.NoError(t, err)
		assert.Equal(t, holds, strings.Contains(n.Body, `"content"`), "%s: %s", set, n.Body)
	}
	d, err := sets.Diff(ctx, "promoted-secret")
	require.NoError(t, err)
	require.Len(t, d.Changes, 1)
	assert.Equal(t, secret+" in secret/p.txt", string(d.Changes[0].New), "a promoted set's diff reads the version it wrote")

	obs := workspace.WithPrincipal(ctx, workspace.Principal{Actor: "olive", Roles: []string{"observer"}, Bound: true})
	for _, set := range []string{"open-secret", "promoted-secret"} {
		_, err := ws.Notes().Get(obs, ChangeSetKind, set)
		assert.ErrorIs(t, err, workspace.ErrForbidden, set)
		if err != nil {
			assert.NotContains(t, err.Error(), "secret/", "the refusal names the record, not the artifact")
		}
		_, err = NewChangeSets(ws, Options{}).Diff(obs, set)
		assert.ErrorIs(t, err, workspace.ErrForbidden, "the change-set operations read through the same gate: %s", set)
	}
	n, err := ws.Notes().Get(obs, ChangeSetKind, "open-public")
	require.NoError(t, err, "a set of names the observer reads is readable")
	assert.Contains(t, n.Body, "public/b.txt")
	n, err = ws.Notes().Get(obs, ChangeSetKind, "discarded-secret")
	require.NoError(t, err, "a discarded set names nothing")
	assert.NotContains(t, n.Body, "secret/")
	page, err := ws.Notes().List(obs, workspace.NoteFilter{Kind: ChangeSetKind})
	require.NoError(t, err)
	var listed []string
	for _, n := range page.Notes {
		listed = append(listed, n.Key)
		assert.NotContains(t, n.Body, "secret/", n.Key)
	}
	assert.Equal(t, []string{"discarded-secret", "open-public"}, listed)

	// No event the observer reads names a secret artifact.
	evs, err := ws.Events().Read(obs, workspace.EventQuery{Limit: 1000})
	require.NoError(t, err)
	for _, ev := range evs.Events {
		assert.NotContains(t, ev.Message+ev.Subject.Name+ev.Subject.ID, "secret/", "%+v", ev)
	}

	// Without a principal (the store's owner, in process) everything reads.
	_, err = ws.Notes().Get(ctx, ChangeSetKind, "open-secret")
	assert.NoError(t, err)
}
