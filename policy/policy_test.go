package policy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
)

func TestPatternMatches(t *testing.T) {
	cases := []struct {
		pat, name string
		want      bool
	}{
		{"**", "a", true},
		{"**", "a/b/c", true},
		{"src/**", "src", true},
		{"src/**", "src/a.go", true},
		{"src/**", "src/a/b.go", true},
		{"src/**", "srcx/a.go", false},
		{"src/**", "plans/a.md", false},
		{"*.md", "a.md", true},
		{"*.md", "docs/a.md", false},
		{"**/*.md", "docs/a.md", true},
		{"**/*.md", "a.md", true},
		{"**/*.md", "a/b/c.md", true},
		{"**/*.md", "a/b/c.go", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/*/b", "a/x/b", true},
		{"a/*/b", "a/x/y/b", false},
		{"decision", "decision", true},
		{"decision", "decisions", false},
		{"de*on", "decision", true},
		{"*", "", true},
		{"file:src/**", "file:src/api.go", true},
	}
	for _, c := range cases {
		p, err := policy.CompilePattern(c.pat)
		require.NoError(t, err, c.pat)
		assert.Equal(t, c.want, p.Match(c.name), "%q ~ %q", c.pat, c.name)
	}
}

func TestPatternRejectsBadShapes(t *testing.T) {
	for _, bad := range []string{"", "a//b", "/a", "a/", "a**", "**/**", "x/**b"} {
		_, err := policy.CompilePattern(bad)
		assert.Error(t, err, "%q", bad)
	}
}

const example = `
default_role = "reader"

[roles.reader]
artifacts_read = ["**"]
notes_read = ["*"]

[roles.planner]
artifacts_read  = ["**"]
artifacts_write = ["plans/**"]
notes_write = ["decision"]
tasks = ["add"]

[roles.implementer]
artifacts_read  = ["**"]
artifacts_write = ["src/**"]
artifacts_delete = []
tasks = ["claim", "finish"]
locks = ["file:src/**"]

[actors]
alice = ["planner"]
bob   = ["implementer"]
"impl-*" = ["implementer"]
admin = ["admin"]
`

func TestCheckFollowsTheIssueExample(t *testing.T) {
	p, err := policy.Parse([]byte(example))
	require.NoError(t, err)
	cases := []struct {
		actor  string
		action policy.Action
		object string
		want   bool
	}{
		{"alice", policy.ArtifactWrite, "plans/a.md", true},
		{"alice", policy.ArtifactDelete, "plans/a.md", true}, // delete defaults to write
		{"alice", policy.ArtifactWrite, "src/a.go", false},
		{"alice", policy.ArtifactRead, "src/a.go", true},
		{"bob", policy.ArtifactWrite, "src/a.go", true},
		{"bob", policy.ArtifactDelete, "src/a.go", false}, // an explicit empty list
		{"bob", policy.TaskClaim, "", true},
		{"bob", policy.TaskAdd, "", false},
		{"alice", policy.TaskAdd, "", true},
		{"impl-7", policy.Lock, "file:src/a.go", true},
		{"impl-7", policy.Lock, "file:docs/a.md", false},
		{"carol", policy.ArtifactRead, "x", true}, // default role
		{"carol", policy.ArtifactWrite, "x", false},
		{"carol", policy.NoteWrite, "decision", false},
		{"alice", policy.NoteWrite, "decision", true},
		{"alice", policy.NoteWrite, "constraint", false},
		{"admin", policy.AdminPolicy, "", true},
		{"alice", policy.AdminPolicy, "", false},
	}
	for _, c := range cases {
		d := p.Allowed(c.actor, c.action, c.object)
		assert.Equal(t, c.want, d.Allowed, "%s %s %q: %s", c.actor, c.action, c.object, d.Reason())
	}
	d := p.Allowed("alice", policy.ArtifactWrite, "src/a.go")
	assert.Equal(t, "artifacts_write", d.Rule)
	assert.Equal(t, []string{"planner"}, d.Roles)
	assert.Contains(t, d.Reason(), "artifacts_write")
}

func TestParseReportsEveryProblemWithItsLine(t *testing.T) {
	src := `default_role = "ghost"
[roles.planner]
artifacts_write = ["plans/**", "a//b"]
tasks = ["add", "fly"]
colour = "blue"

[roles.admin]
admin = ["*"]

[actors]
alice = ["planner", "nobody"]
`
	_, err := policy.Parse([]byte(src))
	require.Error(t, err)
	assert.True(t, errors.Is(err, policy.ErrInvalid))
	var pe *policy.Error
	require.True(t, errors.As(err, &pe))
	got := map[int]string{}
	for _, p := range pe.Problems {
		got[p.Line] = p.Message
	}
	assert.Contains(t, got[1], `"ghost" is not defined`)
	assert.Contains(t, got[3], "empty segment")
	assert.Contains(t, got[4], `unknown right "fly"`)
	assert.Contains(t, got[5], "unknown key")
	assert.Contains(t, got[7], "built-in")
	assert.Contains(t, got[11], `"nobody" is not defined`)
	assert.Len(t, pe.Problems, 6)
}

func TestParseReportsSyntaxErrorsWithTheirLine(t *testing.T) {
	_, err := policy.Parse([]byte("[roles.a]\nartifacts_read = [\"x\"\n"))
	var pe *policy.Error
	require.True(t, errors.As(err, &pe))
	require.Len(t, pe.Problems, 1)
	assert.Greater(t, pe.Problems[0].Line, 0)
}

func TestNoRoleGrantsNothing(t *testing.T) {
	p, err := policy.Parse([]byte("[roles.r]\nartifacts_read=[\"**\"]\n"))
	require.NoError(t, err)
	d := p.Allowed("stranger", policy.ArtifactRead, "a")
	assert.False(t, d.Allowed)
	assert.Empty(t, d.Roles)
	assert.Contains(t, d.Reason(), "no role")
}
