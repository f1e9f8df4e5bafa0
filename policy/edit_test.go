package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
)

const editSrc = `# The team's policy.
default_role = "observer"

[roles.observer]
artifacts_read = ["**"]   # everyone reads

[roles.planner]
artifacts_write = ["plans/**"]

[actors]
# the planners
alice = ["planner"]   # since March
"impl-*" = [
  "observer",
]
root = ["admin"]

[roles.late]
tasks = ["add"]
`

func TestSetActorRolesEditsInPlace(t *testing.T) {
	for _, tc := range []struct {
		name, actor string
		roles       []string
		want        string // the line that must now be in the file
	}{
		{"replace a line, keeping its comment", "alice", []string{"planner", "late"}, `alice = ["planner", "late"]   # since March`},
		{"replace a multi-line array", "impl-*", []string{"planner"}, `"impl-*" = ["planner"]`},
		{"add to the table, before the next", "bob", []string{"late"}, `bob = ["late"]`},
		{"quote a key that must be", "bot.v2 x", []string{}, `"bot.v2 x" = []`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, canonical, err := policy.SetActorRoles([]byte(editSrc), tc.actor, tc.roles)
			require.NoError(t, err)
			assert.False(t, canonical)
			assert.Contains(t, string(out), tc.want+"\n")
			assert.Contains(t, string(out), "# The team's policy.\n", "comments stay")
			assert.Contains(t, string(out), "# the planners\n")
			p, err := policy.Parse(out)
			require.NoError(t, err)
			assert.Equal(t, tc.roles, p.RolesOf(tc.actor))
			assert.Equal(t, []string{"admin"}, p.RolesOf("root"), "the other entries stay")
			assert.Len(t, p.File().Roles, 3)
		})
	}
	// The new line lands inside [actors], not under [roles.late].
	out, _, err := policy.SetActorRoles([]byte(editSrc), "bob", []string{"late"})
	require.NoError(t, err)
	assert.Contains(t, string(out), "root = [\"admin\"]\nbob = [\"late\"]\n\n[roles.late]")
}

func TestSetActorRolesAddsTheTable(t *testing.T) {
	out, canonical, err := policy.SetActorRoles([]byte("[roles.a]\ntasks = [\"add\"] # adders\n\n"), "ann", []string{"a"})
	require.NoError(t, err)
	assert.False(t, canonical)
	assert.Equal(t, "[roles.a]\ntasks = [\"add\"] # adders\n\n[actors]\nann = [\"a\"]\n", string(out))
}

func TestSetActorRolesRendersCanonicallyWhatItCannotEdit(t *testing.T) {
	// An inline table: no [actors] header to edit under.
	src := "actors = { root = [\"admin\"] }\n[roles.a]\ntasks = [\"add\"]\n"
	out, canonical, err := policy.SetActorRoles([]byte(src), "ann", []string{"a"})
	require.NoError(t, err)
	assert.True(t, canonical)
	p, err := policy.Parse(out)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, p.RolesOf("ann"))
	assert.Equal(t, []string{"admin"}, p.RolesOf("root"))
}

func TestSetActorRolesRefusesWhatWouldNotParse(t *testing.T) {
	_, _, err := policy.SetActorRoles([]byte(editSrc), "ann", []string{"ghost"})
	require.ErrorIs(t, err, policy.ErrInvalid)
	_, _, err = policy.SetActorRoles([]byte("[roles.x]\nfly = 1\n"), "ann", nil)
	require.ErrorIs(t, err, policy.ErrInvalid)
	_, _, err = policy.SetActorRoles([]byte(editSrc), "", []string{"late"})
	require.ErrorIs(t, err, policy.ErrInvalid)
}
