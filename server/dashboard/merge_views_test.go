package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// gitIn runs git in dir and returns its trimmed output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// mergeRepo is a repository with one commit on main whose own checkout is
// detached, as a merge queue's hub is.
func mergeRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	gitIn(t, "", "init", "-q", "-b", "main", dir)
	gitIn(t, dir, "config", "gc.auto", "0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("one\ntwo\n"), 0o600))
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "init")
	gitIn(t, dir, "checkout", "-q", "--detach")
	return dir
}

// TestViewsAgreeWithTheBoardAfterTheMergeQueue plays the merge queue with
// real git: four agents claim a task each, work in its worktree and
// submit; two merge queue runs (two mergers, each its own lease owner
// "merger#PID-…") merge three, complete their tasks on their agents'
// behalf ("merged by merger as …", a message of the merge queue's own)
// and give the fourth, a conflict, back to its agent. Every view then
// says what the board says, task by task: the timeline's last attempt
// of each, the charts' counts, the agents' pages.
func TestViewsAgreeWithTheBoardAfterTheMergeQueue(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the merge queue runs it")
	}
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	repo := mergeRepo(t)
	m, err := gitwork.New(ctx, e.ws, gitwork.Config{Repo: repo})
	require.NoError(t, err)
	// A token of its own is no work: shorty gets no lane.
	_, _, err = e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "shorty", Role: "worker"})
	require.NoError(t, err)

	submit := func(agent, title string, files map[string]string) workspace.Task {
		t.Helper()
		tk, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title, Labels: map[string]string{"t": title}})
		require.NoError(t, err)
		_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: agent, Labels: map[string]string{"t": title}, Lease: time.Hour})
		require.NoError(t, err)
		w, err := m.Start(ctx, agent, tk.ID)
		require.NoError(t, err)
		// Heartbeats before the merge: task.updated events that move nothing.
		for range 2 {
			_, err = e.ws.Tasks().Heartbeat(ctx, workspace.Write{Actor: agent}, tk.ID, time.Hour)
			require.NoError(t, err)
		}
		for name, content := range files {
			require.NoError(t, os.WriteFile(filepath.Join(w.Path, name), []byte(content), 0o600))
		}
		gitIn(t, w.Path, "add", "-A")
		gitIn(t, w.Path, "commit", "-q", "-m", title)
		_, err = m.Submit(ctx, agent, tk.ID)
		require.NoError(t, err)
		return tk
	}
	submit("ann", "write the parser", map[string]string{"parser.go": "package p\n", "shared.txt": "ONE\ntwo\n"})
	submit("bob", "write the lexer", map[string]string{"lexer.go": "package p\n"})
	clash := submit("cat", "rename the shared file's first line", map[string]string{"shared.txt": "uno\ntwo\n"})
	var results []gitwork.Result
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { results = append(results, r) }))
	submit("dan", "write the docs", map[string]string{"docs.md": "# p\n"})
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { results = append(results, r) }))
	require.Len(t, results, 4)

	// The board's word: each task's record, as the board shows it.
	board := map[string]workspace.TaskStatus{}
	counts := map[workspace.TaskStatus]int{}
	p, err := e.ws.Tasks().List(ctx, workspace.TaskFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, p.Tasks, 4)
	for _, tk := range p.Tasks {
		board[tk.Title] = tk.Status
		counts[tk.Status]++
	}
	require.Equal(t, workspace.TaskInProgress, board[clash.Title], "the conflict stays with its agent")
	require.Equal(t, 3, counts[workspace.TaskDone], "three merged: %v", results)
	code, page := e.get("/")
	require.Equal(t, http.StatusOK, code, page)
	for title, st := range board {
		_, col, ok := strings.Cut(page, `id="col-`+string(st)+`"`)
		require.True(t, ok, "a %s column", st)
		col, _, _ = strings.Cut(col, "</section>")
		assert.Contains(t, col, html.EscapeString(title), "the board shows %q in %s", title, st)
	}

	// The timeline: each task's last attempt ends as the board says.
	code, page = e.get("/ui/timeline")
	require.Equal(t, http.StatusOK, code, page)
	outcome := map[workspace.TaskStatus]string{workspace.TaskDone: "done", workspace.TaskInProgress: "open"}
	attempt := regexp.MustCompile(`<rect class="attempt ([a-z-]+)"[^>]*><title>([^<]*): ([^<(]*) \([^)]*\): ([a-z-]+)</title>`)
	last := map[string][]string{}
	for _, mt := range attempt.FindAllStringSubmatch(page, -1) {
		require.Equal(t, mt[1], mt[4], "a bar's class is its outcome")
		last[html.UnescapeString(mt[3])] = []string{mt[2], mt[4]}
	}
	require.Len(t, last, 4, "one attempt per task: %s", page)
	owner := map[string]string{"write the parser": "ann", "write the lexer": "bob", clash.Title: "cat", "write the docs": "dan"}
	for title, st := range board {
		assert.Equal(t, []string{owner[title], outcome[st]}, last[title], "the timeline's attempt of %q, which the board has %s", title, st)
	}
	// One lane for the merge queue however many processes ran it; none
	// for an actor that only holds a token, or only made tasks.
	lanes := regexp.MustCompile(`class="lane-name"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(page, -1)
	var names []string
	for _, l := range lanes {
		names = append(names, l[1])
	}
	assert.Equal(t, []string{"ann", "bob", "cat", "dan", "merger"}, names)
	assert.NotContains(t, page, "merger#")

	// The charts count what the board counts.
	code, page = e.get("/ui/charts")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "4 claims, "+strconv.Itoa(counts[workspace.TaskDone])+" done, 0 failed")
	assert.Contains(t, page, "in progress (now "+strconv.Itoa(counts[workspace.TaskInProgress])+")")
	drawn := 0
	for _, m := range regexp.MustCompile(`<rect class="done"[^>]*><title>(\d+) done from`).FindAllStringSubmatch(page, -1) {
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		drawn += n
	}
	assert.Equal(t, counts[workspace.TaskDone], drawn, "the throughput chart's done bars add up to the board's done")

	// An agent's page: the merged task is no claim of ann's; cat still
	// holds the conflicted one.
	_, page = e.get("/ui/agent?actor=ann")
	assert.Contains(t, page, "no tasks in progress")
	_, page = e.get("/ui/agent?actor=cat")
	assert.Contains(t, page, html.EscapeString(clash.Title))
	assert.NotContains(t, page, "no tasks in progress")
}
