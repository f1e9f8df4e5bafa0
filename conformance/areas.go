package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testTaskAreas: a task's areas round-trip through the store and another
// handle, bad areas are ErrInvalid and write nothing, and a claim with
// AvoidOverlap prefers the best ready task whose areas overlap no task in
// progress, falling back to the best ready task when all overlap.
func testTaskAreas(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	api, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "api", Areas: []string{"src/api/", "go.mod", "src/api/"}, Priority: 1,
		Labels: map[string]string{"only": "api"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"src/api/", "go.mod"}, api.Areas, "duplicates are dropped, order kept")
	got, err := ws2.Tasks().Get(ctx, api.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"src/api/", "go.mod"}, got.Areas)
	plain, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "plain", Labels: map[string]string{"only": "none"}})
	require.NoError(t, err)
	got, err = ws2.Tasks().Get(ctx, plain.ID)
	require.NoError(t, err)
	assert.Nil(t, got.Areas)
	_, err = ws2.Tasks().Update(ctx, as("lead"), plain.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err)

	before := snap(t, ws1)
	for _, bad := range []string{"", "/etc/passwd", "../up", "src/../x", "a\\b", "a\nb", "src//x", strings.Repeat("a", workspace.MaxNameLen+1)} {
		_, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "bad", Areas: []string{bad}})
		assert.True(t, errors.Is(err, workspace.ErrInvalid), "area %q: %v", bad, err)
	}
	_, err = ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "many", Areas: make([]string, workspace.MaxAreas+1)})
	assert.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Equal(t, before, snap(t, ws1), "bad areas write nothing")

	// api (priority 1) is in progress on src/api/ and go.mod.
	claimOnly(t, ws1, "ann", "api", workspace.DefaultClaimLease)
	overlapping, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "handler", Areas: []string{"src/api/handler.go"}, Priority: 9})
	require.NoError(t, err)
	apart, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "docs", Areas: []string{"docs/", "src/apix/"}, Priority: 5})
	require.NoError(t, err)
	blockedApart, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "later", Areas: []string{"web/"}, Priority: 8, DependsOn: []string{overlapping.ID}})
	require.NoError(t, err)

	c, err := ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", AvoidOverlap: true})
	require.NoError(t, err)
	assert.Equal(t, apart.ID, c.ID, "the best ready task apart from src/api/, over a higher-priority overlapping one and a blocked one")

	// Only the overlapping one is ready now: it is claimed anyway.
	c, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "cat", AvoidOverlap: true})
	require.NoError(t, err)
	assert.Equal(t, overlapping.ID, c.ID, "when every ready task overlaps, the best of them")
	_, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "dan", AvoidOverlap: true})
	assert.ErrorIs(t, err, workspace.ErrNoTask, "%s waits for its dependency", blockedApart.ID)

	// Without AvoidOverlap, priority alone decides.
	hi, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "hi", Areas: []string{"go.mod"}, Priority: 10})
	require.NoError(t, err)
	_, err = ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "lo", Areas: []string{"other/"}, Priority: 0})
	require.NoError(t, err)
	c, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "eve"})
	require.NoError(t, err)
	assert.Equal(t, hi.ID, c.ID)
}
