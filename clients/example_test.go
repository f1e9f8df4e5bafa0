package clients_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLangGraphTeamExampleResumesAfterKill starts the LangGraph team
// example, kills it (SIGKILL) once the writer finished its second item,
// and starts it again: the second run resumes from the last checkpoint
// (waiting out the dead writer's lease), and every item is done once.
func TestLangGraphTeamExampleResumesAfterKill(t *testing.T) {
	t.Parallel()
	n, npm := node(t)
	clientDir(t, n, npm)
	dir := repoDir(t, "examples", "langgraph-team")
	npmCI(t, npm, dir, filepath.Join("node_modules", "@langchain", "langgraph", "package.json"))
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	env := append(s.env("team"), "TEAM_STEP_MS=150")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first := exec.CommandContext(ctx, n, "team.mjs", "kill-me")
	first.Dir, first.Env = dir, env
	stdout, err := first.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, first.Start())
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), `"node":"writer","item":"billing"`) {
			break
		}
	}
	require.NoError(t, first.Process.Kill())
	_ = first.Wait()
	require.Contains(t, strings.Join(seen, "\n"), `"item":"billing"`, "the first run never got that far")
	assert.NotContains(t, strings.Join(seen, "\n"), "finished")

	second := exec.CommandContext(ctx, n, "team.mjs", "kill-me")
	second.Dir, second.Env = dir, env
	out, err := second.CombinedOutput()
	require.NoError(t, err, "%s\nserver:\n%s", out, s.Logs())
	line := func(prefix string) []byte {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, prefix) {
				return []byte(l)
			}
		}
		t.Fatalf("no %s line in:\n%s", prefix, out)
		return nil
	}
	var resumed struct {
		Resumed string   `json:"resumed"`
		Done    []string `json:"done"`
	}
	require.NoError(t, json.Unmarshal(line(`{"resumed"`), &resumed), "%s", out)
	assert.NotEmpty(t, resumed.Resumed, "the second run resumed from a checkpoint: %s", out)
	assert.Subset(t, resumed.Done, []string{"auth"})
	var finished struct {
		Finished []string `json:"finished"`
	}
	require.NoError(t, json.Unmarshal(line(`{"finished"`), &finished), "%s", out)
	assert.Equal(t, []string{"auth", "billing", "search", "export"}, finished.Finished, "each item done once, in order")
	assert.NotContains(t, string(out), `"node":"researcher","item":"auth"`, "done work is not redone")
}
