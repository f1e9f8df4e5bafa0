package shadow

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func TestChangeSetStagingMergesPerArtifact(t *testing.T) {
	e := newEnv(t, Options{})
	for _, n := range []string{"a", "b"} {
		_, err := e.ws.Artifacts().Create(e.ctx, workspace.Write{Actor: "alice"}, workspace.NewArtifact{Name: n, Content: []byte(n)})
		require.NoError(t, err)
	}
	sets := NewChangeSets(e.ws, Options{})
	_, err := sets.Begin(e.ctx, "s", "alice", "")
	require.NoError(t, err)
	_, err = sets.Begin(e.ctx, "s", "alice", "")
	assert.ErrorIs(t, err, workspace.ErrAlreadyExists, "an open set's name is taken")

	stage := func(r StageRequest) error {
		_, err := sets.Stage(e.ctx, "s", "alice", r)
		return err
	}
	require.NoError(t, stage(StageRequest{Op: OpCreate, Name: "n", Content: []byte("1")}))
	require.NoError(t, stage(StageRequest{Op: OpUpdate, Name: "n", Content: []byte("2")}))
	require.NoError(t, stage(StageRequest{Op: OpRename, Name: "n", NewName: "m"}))
	require.NoError(t, stage(StageRequest{Op: OpUpdate, Name: "a", Content: []byte("a2")}))
	require.NoError(t, stage(StageRequest{Op: OpRename, Name: "a", NewName: "a-moved"}))
	require.NoError(t, stage(StageRequest{Op: OpDelete, Name: "b"}))
	for _, c := range []struct {
		r    StageRequest
		want error
	}{
		{StageRequest{Op: OpCreate, Name: "b"}, workspace.ErrAlreadyExists},                     // b is live until promotion
		{StageRequest{Op: OpUpdate, Name: "b"}, workspace.ErrNotFound},                          // the set deletes it
		{StageRequest{Op: OpUpdate, Name: "a"}, workspace.ErrNotFound},                          // the set renamed it
		{StageRequest{Op: OpRename, Name: "m", NewName: "a-moved"}, workspace.ErrAlreadyExists}, // taken in the set
		{StageRequest{Op: OpUpdate, Name: "zz"}, workspace.ErrNotFound},
		{StageRequest{Op: OpCreate, Name: "../x"}, workspace.ErrInvalid},
		{StageRequest{Op: "chmod", Name: "x"}, workspace.ErrInvalid},
	} {
		err := stage(c.r)
		assert.True(t, errors.Is(err, c.want), "%+v: %v", c.r, err)
	}
	d, err := sets.Diff(e.ctx, "s")
	require.NoError(t, err)
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.Op+" "+c.Name+">"+c.NewName+" "+string(c.New))
	}
	assert.Equal(t, []string{"create m> 2", "rename a>a-moved a2", "delete b> "}, got)
	assert.Equal(t, []byte("a"), d.Changes[1].Old, "the diff's old side is the version the set started from")

	page, err := e.ws.Artifacts().List(e.ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	assert.Len(t, page.Artifacts, 2, "nothing staged is visible")
	v, err := sets.Validate(e.ctx, "s", "")
	require.NoError(t, err)
	require.True(t, v.Passed)
	_, err = sets.Promote(e.ctx, "s", "")
	require.NoError(t, err)
	page, err = e.ws.Artifacts().List(e.ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	var live []string
	for _, a := range page.Artifacts {
		live = append(live, a.Name)
	}
	assert.Equal(t, []string{"a-moved", "m"}, live)
}

func TestChangeSetValidationUsesTheSameRules(t *testing.T) {
	e := newEnv(t, Options{})
	_, err := e.ws.Artifacts().Create(e.ctx, workspace.Write{Actor: "alice"}, workspace.NewArtifact{Name: "docs/a.md", Content: []byte("a")})
	require.NoError(t, err)
	tk, err := e.ws.Tasks().Create(e.ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t", Areas: []string{"docs/"}})
	require.NoError(t, err)
	_, err = e.ws.Locks().Acquire(e.ctx, workspace.AcquireRequest{Resource: "artifact:docs/", Owner: "bob", TTL: time.Hour})
	require.NoError(t, err)
	sets := NewChangeSets(e.ws, Options{
		Policy:     prefixPolicy{"alice": {"artifact:docs/", "artifact:src/"}},
		Validators: []string{"grep -q good docs/a.md"},
	})
	_, err = sets.Begin(e.ctx, "s", "alice", tk.ID)
	require.NoError(t, err)
	for _, r := range []StageRequest{
		{Op: OpUpdate, Name: "docs/a.md", Content: []byte("bad")},
		{Op: OpCreate, Name: "src/x.go", Content: []byte("x")},
		{Op: OpCreate, Name: "web/y.js", Content: []byte("y")},
	} {
		_, err := sets.Stage(e.ctx, "s", "alice", r)
		require.NoError(t, err)
	}
	v, err := sets.Validate(e.ctx, "s", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"area src/x.go", "area web/y.js", "command ", "lease docs/a.md", "role web/y.js"}, violated(v))
}

func TestGCRemovesShadowsWhoseTaskEndedOrClaimLapsed(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a": "a"})
	task := func(claimer string, lease time.Duration, finish bool) string {
		tk, err := e.ws.Tasks().Create(e.ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: claimer})
		require.NoError(t, err)
		got, err := e.ws.Tasks().Claim(e.ctx, workspace.ClaimRequest{Actor: claimer, Lease: lease})
		require.NoError(t, err)
		require.Equal(t, tk.ID, got.ID)
		if finish {
			_, err = e.ws.Tasks().Complete(e.ctx, workspace.Write{Actor: claimer}, tk.ID, workspace.TaskResult{Summary: "ok"})
			require.NoError(t, err)
		}
		return tk.ID
	}
	done := e.open(t, "alice", task("alice", time.Minute, true))
	lapsed := e.open(t, "bob", task("bob", time.Minute, false))
	live := e.open(t, "carol", task("carol", 10*time.Hour, false))
	idle := e.open(t, "dave", "")

	removed, err := e.m.GC(e.ctx, GCRequest{Actor: "janitor", Age: time.Hour})
	require.NoError(t, err)
	assert.Empty(t, removed, "nothing is an hour stale yet")

	later, err := New(e.ws, Options{Root: e.root, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	require.NoError(t, err)
	removed, err = later.GC(e.ctx, GCRequest{Actor: "janitor", Age: time.Hour})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{done.ID, lapsed.ID, idle.ID}, removed)
	list, err := later.List(e.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, live.ID, list[0].ID)
	assert.NoDirExists(t, done.Path)
}
