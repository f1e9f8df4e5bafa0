package workspace_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// TestWriteCheckAnswersAsTheEngineDoes asks WriteCheck ahead, then makes
// each write: the engine must agree with every answer.
func TestWriteCheckAnswersAsTheEngineDoes(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })

	c, err := ws.WriteCheck(ctx)
	require.NoError(t, err)
	assert.True(t, c.None())
	assert.NoError(t, c.Check(workspace.Principal{Actor: "anyone"}, "src/a.go", true), "no policy: everything allowed")

	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(`
[roles.impl]
artifacts_read   = ["**"]
artifacts_write  = ["src/**", "docs/**"]
artifacts_delete = ["src/**"]
[actors]
root = ["admin"]
bob  = ["impl"]
`)})
	require.NoError(t, err)
	for _, n := range []string{"docs/d.md", "web/w.js"} {
		_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: n, Content: []byte("x")})
		require.NoError(t, err)
	}
	c, err = ws.WriteCheck(ctx)
	require.NoError(t, err)
	assert.False(t, c.None())

	bob := workspace.Principal{Actor: "bob"}
	cases := []struct {
		who   workspace.Principal
		name  string
		del   bool
		allow bool
		rule  string
	}{
		{bob, "src/one.go", false, true, ""},
		{bob, "web/w.js", false, false, "artifacts_write"},
		{bob, "docs/d.md", true, false, "artifacts_delete"},
		{bob, workspace.PolicyArtifact, false, false, "admin"},
		{workspace.Principal{Actor: "bob", Roles: []string{"admin"}}, "web/w.js", false, true, ""},
		{workspace.Principal{Actor: "stranger"}, "src/two.go", false, false, "artifacts_write"},
	}
	for _, tc := range cases {
		err := c.Check(tc.who, tc.name, tc.del)
		wctx := workspace.WithPrincipal(ctx, tc.who)
		w := workspace.Write{Actor: tc.who.Actor}
		var engine error
		switch {
		case tc.del:
			engine = ws.Artifacts().Delete(wctx, w, workspace.ByName(tc.name))
		case strings.HasPrefix(tc.name, "src/"):
			_, engine = ws.Artifacts().Create(wctx, w, workspace.NewArtifact{Name: tc.name, Content: []byte("y")})
		default:
			_, engine = ws.Artifacts().Update(wctx, w, workspace.ByName(tc.name), workspace.ArtifactChange{Content: []byte("[actors]\nbob = [\"admin\"]\n")})
		}
		if tc.allow {
			assert.NoError(t, err, "%+v", tc)
			assert.NoError(t, engine, "the engine agrees: %+v", tc)
			continue
		}
		var fe *workspace.ForbiddenError
		require.ErrorAs(t, err, &fe, "%+v", tc)
		assert.Equal(t, tc.who.Actor, fe.Actor)
		assert.Contains(t, fe.Rule, tc.rule)
		assert.ErrorIs(t, engine, workspace.ErrForbidden, "the engine agrees: %+v", tc)
	}
}
