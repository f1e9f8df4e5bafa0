package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// editEventLine changes event seq's message in events.ndjson, its hash
// kept, as a hand with an editor could.
func editEventLine(t *testing.T, dir string, seq int64) {
	t.Helper()
	path := filepath.Join(dir, eventsFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out bytes.Buffer
	edited := 0
	for line := range bytes.Lines(data) {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(line, &ev))
		if ev["seq"] == float64(seq) {
			require.NotEmpty(t, ev["hash"], "event %d carries a hash", seq)
			ev["message"] = "nothing to see here"
			edited++
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		out.Write(append(b, '\n'))
	}
	require.Equal(t, 1, edited)
	require.NoError(t, os.WriteFile(path, out.Bytes(), fileMode))
}

func verifyDir(t *testing.T, dir string) workspace.VerifyReport {
	t.Helper()
	ws, err := Open(context.Background(), dir, false, workspace.Options{})
	require.NoError(t, err)
	defer ws.Close()
	r, err := ws.Verify(context.Background())
	require.NoError(t, err)
	return r
}

// A store written before the chain (testdata/format1), migrated up, has
// every event chained: verify checks all of them, and catches an edit to
// one of them made after the upgrade.
func TestUpgradeChainsTheEventsAlreadyThere(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	copyTree(t, filepath.Join("testdata", "format1"), dir)
	m, err := jsonDriver{}.OpenMigrator(ctx, driver.Config{Target: dir})
	require.NoError(t, err)
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Close())

	ws, err := Open(ctx, dir, false, workspace.Options{})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "x"})
	require.NoError(t, err)
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained, "no event is left without a hash")
	assert.Equal(t, int64(14), r.Events, "the 13 old events and the new one")

	editEventLine(t, dir, 5)
	r = verifyDir(t, dir)
	assert.False(t, r.OK())
	assert.Equal(t, int64(5), r.BrokenSeq, "problems: %v", r.Problems)
}
