package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

// builtQueries lists the built queries c keeps prepared that contain part.
func builtQueries(c *stmtCache, part string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var qs []string
	for q := range c.built {
		if strings.Contains(q, part) {
			qs = append(qs, q)
		}
	}
	return qs
}

// TestBuiltQueriesArePreparedAfterTheirFirstRun: a list filtered by labels
// and a claim by labels run unprepared once, are prepared when their
// transaction has ended (the read's on the read pool, the claim's on the
// writer), and later runs use that statement with the same answers.
func TestBuiltQueriesArePreparedAfterTheirFirstRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	ws := engine.New(st, workspace.Options{})
	t.Cleanup(func() { _ = ws.Close() })
	w := workspace.Write{Actor: "a"}
	for i := range 3 {
		_, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: fmt.Sprint("t", i), Labels: map[string]string{"team": "core"}})
		require.NoError(t, err)
	}
	filter := workspace.TaskFilter{Labels: map[string]string{"team": "core"}}

	first, err := ws.Tasks().List(ctx, filter)
	require.NoError(t, err)
	require.Len(t, first.Tasks, 3)
	lists := builtQueries(st.rs, "ORDER BY t.id")
	require.Len(t, lists, 1, "the labelled list is prepared after its first run")
	again, err := ws.Tasks().List(ctx, filter)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, lists, builtQueries(st.rs, "ORDER BY t.id"), "its second run adds nothing")

	claim := workspace.ClaimRequest{Actor: "a", Labels: map[string]string{"team": "core"}}
	c1, err := ws.Tasks().Claim(ctx, claim)
	require.NoError(t, err)
	require.Len(t, builtQueries(st.ws, "t.priority DESC"), 1, "the labelled claim is prepared on the writer")
	c2, err := ws.Tasks().Claim(ctx, claim)
	require.NoError(t, err)
	assert.NotEqual(t, c1.ID, c2.ID)
	assert.Len(t, builtQueries(st.ws, "t.priority DESC"), 1)
}

// TestBuiltQueriesAreBounded: a cache keeps at most maxBuilt built
// queries; the rest keep running unprepared, and a closed cache prepares
// nothing more.
func TestBuiltQueriesAreBounded(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	c := st.rs
	for i := range maxBuilt + 10 {
		q := fmt.Sprintf("SELECT ? + %d", i)
		assert.Nil(t, c.get(q))
		c.prepareWanted(ctx)
		if i < maxBuilt {
			require.NotNil(t, c.get(q), "query %d", i)
		} else {
			assert.Nil(t, c.get(q), "query %d", i)
		}
	}
	assert.Len(t, builtQueries(c, "SELECT ? +"), maxBuilt)

	c.close()
	assert.Nil(t, c.get("SELECT ? - 1"))
	c.prepareWanted(ctx)
	assert.Empty(t, builtQueries(c, "SELECT ? - 1"))
}
