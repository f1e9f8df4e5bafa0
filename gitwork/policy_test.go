package gitwork_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// queuePolicy lets bob (an implementer) write src/**, delete nothing, and
// keep his worktree records and patches; the lead and the merger are admins.
const queuePolicy = `
[roles.implementer]
artifacts_read  = ["**"]
artifacts_write = ["src/**", "worktrees/**"]
artifacts_delete = []
notes_read      = ["*"]
notes_write     = ["worktree"]
tasks           = ["claim", "finish"]
locks           = ["**"]

[actors]
lead   = ["admin"]
merger = ["admin"]
bob    = ["implementer"]
`

func TestMergeQueueFailsAnEntryThePolicyRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(queuePolicy)})
	require.NoError(t, err)
	m := newManager(t, ws, gitwork.Config{Repo: repo, Validate: []string{"touch ran-validation"}})

	allowed := work(t, m, ws, "bob", "t1", map[string]string{"src/ok.go": "ok\n"})
	outside := work(t, m, ws, "bob", "t2", map[string]string{"src/fine.go": "f\n", "docs/z.md": "z\n"})
	// A deletion needs artifacts_delete, which bob has for nothing.
	task := claimed(t, ws, "bob", "t3")
	w, err := m.Start(ctx, "bob", task.ID)
	require.NoError(t, err)
	gitT(t, w.Path, "rm", "-q", "a.txt")
	gitT(t, w.Path, "commit", "-q", "-m", "t3")
	deleting, err := m.Submit(ctx, "bob", task.ID)
	require.NoError(t, err)

	var got []gitwork.Result
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { got = append(got, r) }))
	require.Len(t, got, 3)
	assert.Equal(t, gitwork.StatusMerged, got[0].Status, got[0].Detail)
	assert.Equal(t, gitwork.StatusFailed, got[1].Status)
	assert.Equal(t, gitwork.StatusFailed, got[2].Status)

	rec := record(t, ws, outside.Task)
	assert.Equal(t, gitwork.StatusFailed, rec.Status)
	assert.Contains(t, rec.Detail, "docs/z.md (artifacts_write)", "the record names the path and the rule")
	assert.NotContains(t, strings.SplitN(rec.Detail, "\n", 2)[0], "src/fine.go", "allowed paths are not listed")
	assert.Contains(t, rec.Detail, `forbidden: "bob" may not artifact.write "docs/z.md"`)
	assert.Contains(t, record(t, ws, deleting.Task).Detail, "a.txt (artifacts_delete)")

	// The note's event says it, like a red validation.
	page, err := ws.Events().Read(ctx, workspace.EventQuery{SubjectKind: "note", Limit: 1000})
	require.NoError(t, err)
	var msgs []string
	for _, e := range page.Events {
		msgs = append(msgs, e.Message)
	}
	assert.Contains(t, strings.Join(msgs, "\n"), "failed: the policy refuses 1 changed paths of bob: docs/z.md (artifacts_write)")

	// Only the allowed entry reached the branch; the refused ones stay
	// with their agent.
	assert.Equal(t, []string{"init", "t1"}, firstParents(t, repo))
	assert.Equal(t, "a\n", gitT(t, repo, "show", "main:a.txt")+"\n")
	for _, w := range []gitwork.Worktree{outside, deleting} {
		tk, err := ws.Tasks().Get(ctx, w.Task)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskInProgress, tk.Status)
	}
	assert.Equal(t, gitwork.StatusReleased, record(t, ws, allowed.Task).Status)
}
