package shadow

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// teamPolicy lets alice (an implementer) write src/** and docs/**, delete
// only under src/, and record her shadows and change sets; root is admin.
const teamPolicy = `
[roles.implementer]
artifacts_read   = ["**"]
artifacts_write  = ["src/**", "docs/**", "shadows/**"]
artifacts_delete = ["src/**"]
notes_read       = ["*"]
notes_write      = ["shadow", "changeset"]
tasks            = ["add", "claim", "finish"]
locks            = ["**"]

[actors]
root  = ["admin"]
alice = ["implementer"]
`

// policyEnv is an env on a real SQLite workspace holding teamPolicy.
func policyEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := "sqlite:" + filepath.Join(base, "ws.db")
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(teamPolicy)})
	require.NoError(t, err)
	m, err := New(ws, Options{Root: filepath.Join(base, "shadows")})
	require.NoError(t, err)
	dir := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(dir, 0o755))
	return &env{ctx: ctx, dsn: dsn, ws: ws, m: m, root: m.opts.Root, dir: dir}
}

func TestShadowValidationChecksTheWorkspacePolicyByDefault(t *testing.T) {
	e := policyEnv(t)
	write(t, e.dir, map[string]string{"src/a.go": "a", "src/old.go": "o", "docs/r.md": "r", "web/x.js": "x", "docs/gone.md": "g"})
	tk, err := e.ws.Tasks().Create(e.ctx, workspace.Write{Actor: "root"}, workspace.NewTask{Title: "t", Areas: []string{"src/", "docs/", "web/", ".agentspace/"}})
	require.NoError(t, err)
	s := e.open(t, "alice", tk.ID)
	write(t, s.Path, map[string]string{"src/a.go": "A", "docs/r.md": "R", "web/x.js": "X", workspace.PolicyArtifact: "[actors]\nalice = [\"admin\"]\n"})
	require.NoError(t, os.Remove(filepath.Join(s.Path, "src/old.go")))
	require.NoError(t, os.Remove(filepath.Join(s.Path, "docs/gone.md")))

	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"role .agentspace/policy.toml", "role docs/gone.md", "role web/x.js"}, violated(v),
		"writes outside artifacts_write, a delete outside artifacts_delete, and the policy file itself are refused")
	for _, vi := range v.Violations {
		assert.Contains(t, vi.Detail, `"alice"`, "the detail names the actor")
	}
	assert.Contains(t, detailOf(v, "web/x.js"), "artifacts_write")
	assert.Contains(t, detailOf(v, "docs/gone.md"), "artifacts_delete")
	assert.Contains(t, detailOf(v, ".agentspace/policy.toml"), "admin")

	// The admin passes the same diff on the policy rule: roles, not areas or
	// leases, decided.
	v, err = e.m.Validate(e.ctx, s.ID, "root")
	require.NoError(t, err)
	assert.Empty(t, violated(v))

	// Only the violations are reverted; the rest promotes, as alice.
	_, err = e.m.Validate(e.ctx, s.ID, "alice")
	require.NoError(t, err)
	_, err = e.m.Discard(e.ctx, s.ID, "alice", true)
	require.NoError(t, err)
	e.validPromote(t, s)
	assert.Equal(t, map[string]string{"src/a.go": "644:A", "docs/r.md": "644:R", "web/x.js": "644:x", "docs/gone.md": "644:g"}, tree(t, e.dir))
}

func TestShadowValidationUsesTheTokenRolesTheContextCarries(t *testing.T) {
	e := policyEnv(t)
	write(t, e.dir, map[string]string{"web/x.js": "x"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"web/x.js": "X"})
	// A server's token for alice with the admin role: its roles are checked.
	ctx := workspace.WithPrincipal(e.ctx, workspace.Principal{Actor: "alice", Roles: []string{"admin"}})
	v, err := e.m.Validate(ctx, s.ID, "alice")
	require.NoError(t, err)
	assert.True(t, v.Passed, "%v", violated(v))
	// A principal for someone else does not lend alice its roles.
	ctx = workspace.WithPrincipal(e.ctx, workspace.Principal{Actor: "root", Roles: []string{"admin"}})
	v, err = e.m.Validate(ctx, s.ID, "alice")
	require.NoError(t, err)
	assert.Equal(t, []string{"role web/x.js"}, violated(v))
	// A verified principal (a server's token) for someone else is refused:
	// the engine writes nothing in another's name.
	ctx = workspace.WithPrincipal(e.ctx, workspace.Principal{Actor: "root", Roles: []string{"admin"}, Bound: true})
	_, err = e.m.Validate(ctx, s.ID, "alice")
	require.ErrorIs(t, err, workspace.ErrForbidden)
}

func TestChangeSetValidationChecksTheWorkspacePolicyByDefault(t *testing.T) {
	e := policyEnv(t)
	for _, n := range []string{"src/keep.go", "docs/old.md", "docs/a.md"} {
		_, err := e.ws.Artifacts().Create(e.ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: n, Content: []byte("x")})
		require.NoError(t, err)
	}
	sets := NewChangeSets(e.ws, Options{})
	_, err := sets.Begin(e.ctx, "s", "alice", "")
	require.NoError(t, err)
	for _, r := range []StageRequest{
		{Op: OpUpdate, Name: "docs/a.md", Content: []byte("new")},
		{Op: OpCreate, Name: "web/y.js", Content: []byte("y")},
		{Op: OpRename, Name: "docs/old.md", NewName: "src/moved.md"},
		{Op: OpDelete, Name: "src/keep.go"},
	} {
		_, err := sets.Stage(e.ctx, "s", "alice", r)
		require.NoError(t, err)
	}
	v, err := sets.Validate(e.ctx, "s", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"role docs/old.md", "role web/y.js"}, violated(v),
		"a rename deletes its old name: docs/ may be written, not deleted")
	_, err = sets.Promote(e.ctx, "s", "alice")
	require.ErrorIs(t, err, ErrNotValidated)
	a, err := e.ws.Artifacts().Get(e.ctx, workspace.ByName("docs/a.md"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(a.Content), "nothing was written")
}

func detailOf(v Validation, path string) string {
	for _, vi := range v.Violations {
		if vi.Path == path {
			return vi.Detail
		}
	}
	return ""
}

func TestShadowPromotionRefusesWhatAPolicyChangedSinceValidationForbids(t *testing.T) {
	e := policyEnv(t)
	write(t, e.dir, map[string]string{"docs/r.md": "r"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"docs/r.md": "R"})
	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.True(t, v.Passed, "%v", violated(v))

	// The lead takes docs/ from implementers after the validation.
	_, err = e.ws.Artifacts().Update(e.ctx, workspace.Write{Actor: "root"}, workspace.ByName(workspace.PolicyArtifact),
		workspace.ArtifactChange{Content: []byte(strings.Replace(teamPolicy, `"src/**", "docs/**", "shadows/**"`, `"src/**", "shadows/**"`, 1))})
	require.NoError(t, err)
	_, err = e.m.Promote(e.ctx, s.ID, "")
	var fe *workspace.ForbiddenError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "docs/r.md", fe.Object)
	assert.Equal(t, map[string]string{"docs/r.md": "644:r"}, tree(t, e.dir), "nothing was promoted")
}
