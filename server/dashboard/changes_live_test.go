package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// TestChangesPageFollowsAChangeSetInAnotherHandle: the changes page
// follows note events; a change set begun, validated and then promoted
// through another handle makes the stream name that view each time, and
// the refreshed fragment shows the set with each rule's verdict, then its
// promotion.
func TestChangesPageFollowsAChangeSetInAnotherHandle(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner"}, workspace.NewArtifact{Name: "docs/guide.md", Content: []byte("# Guide\n")})
	require.NoError(t, err)
	code, page := e.get("/ui/changes?all=1")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `hx-trigger="sse:notes"`, "the page follows note events")
	assert.NotContains(t, page, "live-set")

	head, err := e.ws.Events().Head(ctx)
	require.NoError(t, err)
	names, stop := openStream(t, e, head)
	defer stop()
	// heard waits for the stream to name the changes page's view.
	heard := func() {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case n := <-names:
				if n == "notes" {
					return
				}
			case <-deadline:
				t.Fatal("the stream never named the notes view")
			}
		}
	}

	cs := shadow.NewChangeSets(e.other(), shadow.Options{})
	_, err = cs.Begin(ctx, "live-set", "worker-9", "")
	require.NoError(t, err)
	_, err = cs.Stage(ctx, "live-set", "worker-9", shadow.StageRequest{Op: shadow.OpUpdate, Name: "docs/guide.md", Content: []byte("# Guide\n\nmore\n")})
	require.NoError(t, err)
	_, err = cs.Validate(ctx, "live-set", "worker-9")
	require.NoError(t, err)
	heard()
	_, frag := e.get("/ui/frag/changes?all=1")
	assert.Regexp(t, `(?s)live-set.*worker-9.*state-open.*passed.*area: ok.*role: ok.*lease: ok`, frag)

	_, err = cs.Promote(ctx, "live-set", "worker-9")
	require.NoError(t, err)
	heard()
	_, frag = e.get("/ui/frag/changes?all=1")
	assert.Regexp(t, `(?s)live-set.*state-promoted.*1 versions`, frag)
	_, frag = e.get("/ui/frag/changeset?name=live-set")
	assert.Contains(t, frag, `docs/guide.md v2</a>`, "the promotion history")
}
