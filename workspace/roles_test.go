package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
)

const rolesPolicy = `# who does what
default_role = "observer"

[roles.observer]
artifacts_read = ["**"]

[roles.impl]
artifacts_write = ["src/**"]

[actors]
root = ["admin"]   # the operator
"impl-*" = ["impl"]
`

func rolesWS(t *testing.T, src string) (context.Context, *workspace.Workspace) {
	t.Helper()
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	if src != "" {
		_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(src)})
		require.NoError(t, err)
	}
	return ctx, ws
}

func TestGrantAndRevokeRoleKeepTheActorsOtherRights(t *testing.T) {
	ctx, ws := rolesWS(t, rolesPolicy)
	root := workspace.Write{Actor: "root"}
	// ann has the default role; granting impl keeps it.
	rc, err := ws.GrantRole(ctx, root, "ann", "impl")
	require.NoError(t, err)
	assert.True(t, rc.Changed)
	assert.False(t, rc.Canonical)
	assert.Equal(t, []string{"observer", "impl"}, rc.Roles)
	assert.Equal(t, int64(2), rc.Version)
	// impl-2 holds impl by a pattern: revoking it writes an exact entry.
	rc, err = ws.RevokeRole(ctx, root, "impl-2", "impl")
	require.NoError(t, err)
	assert.Equal(t, []string{}, rc.Roles)
	p, err := ws.Policy(ctx)
	require.NoError(t, err)
	assert.Empty(t, p.RolesOf("impl-2"), "an empty exact entry: no rights, not the default role")
	assert.Equal(t, []string{"impl"}, p.RolesOf("impl-3"), "the pattern still holds for the others")
	art, err := ws.Artifacts().Get(ctx, workspace.ByName(workspace.PolicyArtifact))
	require.NoError(t, err)
	assert.Contains(t, string(art.Content), "root = [\"admin\"]   # the operator\n")
	assert.Contains(t, string(art.Content), "# who does what\n")
	assert.Equal(t, "root", art.UpdatedBy)
	// The engine enforces the new version at once.
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "ann"}, workspace.NewArtifact{Name: "src/a.go", Content: []byte("x")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "impl-2"}, workspace.NewArtifact{Name: "src/b.go", Content: []byte("x")})
	require.ErrorIs(t, err, workspace.ErrForbidden)

	// Nothing to do: nothing written.
	rc, err = ws.GrantRole(ctx, root, "impl-3", "impl")
	require.NoError(t, err)
	assert.False(t, rc.Changed)
	rc, err = ws.RevokeRole(ctx, root, "ann", "admin")
	require.NoError(t, err)
	assert.False(t, rc.Changed)
	assert.Equal(t, int64(3), rc.Version)
}

func TestRoleChangesAreTypedErrors(t *testing.T) {
	ctx, ws := rolesWS(t, "")
	root := workspace.Write{Actor: "root"}
	_, err := ws.GrantRole(ctx, root, "ann", "impl")
	require.ErrorIs(t, err, workspace.ErrNotFound, "no policy to change")
	_, err = ws.Artifacts().Create(ctx, root, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(rolesPolicy)})
	require.NoError(t, err)
	_, err = ws.GrantRole(ctx, root, "ann", "ghost")
	require.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = ws.GrantRole(ctx, root, "", "impl")
	require.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = ws.GrantRole(ctx, workspace.Write{Actor: "ann"}, "ann", "admin")
	var fe *workspace.ForbiddenError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, string(policy.AdminPolicy), fe.Action)
	_, err = ws.RevokeRole(ctx, root, "root", "admin")
	require.ErrorIs(t, err, workspace.ErrInvalid, "the author may not lock itself out")
	_, err = ws.GrantRole(ctx, workspace.Write{Actor: "root", IfVersion: 7}, "ann", "impl")
	require.ErrorIs(t, err, workspace.ErrConflict, "a caller's own IfVersion is not retried")
	art, err := ws.Artifacts().Get(ctx, workspace.ByName(workspace.PolicyArtifact))
	require.NoError(t, err)
	assert.Equal(t, int64(1), art.Version, "nothing was written")
}

// TestConcurrentRoleChangesLoseNothing: grants racing on one policy are
// each written once, none lost (a conflict re-reads and edits again).
func TestConcurrentRoleChangesLoseNothing(t *testing.T) {
	ctx, ws := rolesWS(t, rolesPolicy)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = ws.GrantRole(ctx, workspace.Write{Actor: "root"}, fmt.Sprint("dev", i), "impl")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	p, err := ws.Policy(ctx)
	require.NoError(t, err)
	for i := range n {
		assert.Equal(t, []string{"observer", "impl"}, p.RolesOf(fmt.Sprint("dev", i)))
	}
}
