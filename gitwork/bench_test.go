package gitwork_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
)

// bigRepo makes a repository of n files in 100 directories.
func bigRepo(b *testing.B, n int) string {
	b.Helper()
	repo := newRepo(b)
	for i := range n {
		writeFile(b, filepath.Join(repo, fmt.Sprintf("d%02d/f%05d.txt", i%100, i)), fmt.Sprintf("file %d\n", i))
	}
	gitT(b, repo, "add", "-A")
	gitT(b, repo, "commit", "-q", "-m", "files")
	gitT(b, repo, "checkout", "-q", "--detach")
	return repo
}

// BenchmarkWorktree10kFiles: creating and releasing a task's worktree on a
// repository of 10,000 files (git, workspace records, claim and backup
// checks), against the bare git commands (worktree add -b, worktree
// remove, branch delete) in the same run.
func BenchmarkWorktree10kFiles(b *testing.B) {
	repo := bigRepo(b, 10000)
	b.Run("bare-git", func(b *testing.B) {
		root := b.TempDir()
		for i := range b.N {
			dir := filepath.Join(root, fmt.Sprint(i))
			gitT(b, repo, "worktree", "add", "-q", "-b", "bare/"+fmt.Sprint(i), "--", dir, "main")
			gitT(b, repo, "worktree", "remove", "--force", "--", dir)
			gitT(b, repo, "branch", "-q", "-D", "bare/"+fmt.Sprint(i))
		}
	})
	b.Run("gitwork", func(b *testing.B) {
		ctx := context.Background()
		ws := openWS(b)
		m := newManager(b, ws, gitwork.Config{Repo: repo, Root: b.TempDir()})
		for i := range b.N {
			b.StopTimer()
			task := claimed(b, ws, "ann", fmt.Sprint("w", b.N, "-", i))
			b.StartTimer()
			_, err := m.Start(ctx, "ann", task.ID)
			require.NoError(b, err)
			_, err = m.Release(ctx, "ann", task.ID)
			require.NoError(b, err)
		}
	})
}

// BenchmarkMergeQueue: merges through the queue with a trivial validator
// ("true"), each entry a one-file commit on a branch behind main (so each
// is rebased), against the bare git commands one merge runs (merge-tree,
// a detached checkout to rebase in, rebase, a detached checkout to
// validate in, the validator, update-ref) in the same run. Reports
// merges/min.
func BenchmarkMergeQueue(b *testing.B) {
	b.Run("bare-git", func(b *testing.B) {
		repo := newRepo(b)
		heads := branches(b, repo, b.N)
		tmp := b.TempDir()
		b.ResetTimer()
		for i, h := range heads {
			old := gitT(b, repo, "rev-parse", "main")
			gitT(b, repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", old, h)
			dir := filepath.Join(tmp, fmt.Sprint("r", i))
			gitT(b, repo, "worktree", "add", "-q", "--detach", "--", dir, h)
			gitT(b, dir, "rebase", "-q", "--onto", old, gitT(b, repo, "merge-base", old, h))
			cand := gitT(b, dir, "rev-parse", "HEAD")
			gitT(b, repo, "worktree", "remove", "--force", "--", dir)
			vdir := filepath.Join(tmp, fmt.Sprint("v", i))
			gitT(b, repo, "worktree", "add", "-q", "--detach", "--", vdir, cand)
			cmd := exec.Command("sh", "-c", "true")
			cmd.Dir = vdir
			require.NoError(b, cmd.Run())
			gitT(b, repo, "worktree", "remove", "--force", "--", vdir)
			gitT(b, repo, "update-ref", "refs/heads/main", cand, old)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "merges/min")
	})
	b.Run("gitwork", func(b *testing.B) {
		ctx := context.Background()
		repo, ws := newRepo(b), openWS(b)
		m := newManager(b, ws, gitwork.Config{Repo: repo, Validate: []string{"true"}})
		for i := range b.N {
			work(b, m, ws, "ann", fmt.Sprint("entry-", i), map[string]string{fmt.Sprint("f", i, ".txt"): "x\n"})
		}
		// Move main so every entry is rebased, as in the bare run.
		hand := filepath.Join(b.TempDir(), "hand")
		gitT(b, repo, "worktree", "add", "-q", "--detach", hand, "main")
		writeFile(b, filepath.Join(hand, "moved.txt"), "m\n")
		gitT(b, hand, "add", "-A")
		gitT(b, hand, "commit", "-q", "-m", "moved")
		gitT(b, repo, "update-ref", "refs/heads/main", gitT(b, hand, "rev-parse", "HEAD"))
		b.ResetTimer()
		merged := 0
		require.NoError(b, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) {
			if r.Status == gitwork.StatusMerged {
				merged++
			}
		}))
		require.Equal(b, b.N, merged)
		b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "merges/min")
	})
}

// branches makes n branches, each one commit on main's first commit, and
// moves main once so each must be rebased.
func branches(b *testing.B, repo string, n int) []string {
	b.Helper()
	base := gitT(b, repo, "rev-parse", "main")
	var heads []string
	for i := range n {
		blob := strings.TrimSpace(gitIn(b, repo, fmt.Sprint("x", i, "\n"), "hash-object", "-w", "--stdin"))
		idx := filepath.Join(b.TempDir(), "idx")
		env := []string{"GIT_INDEX_FILE=" + idx}
		gitEnv(b, repo, env, "read-tree", base)
		gitEnv(b, repo, env, "update-index", "--add", "--cacheinfo", "100644,"+blob+",f"+fmt.Sprint(i)+".txt")
		t := gitEnv(b, repo, env, "write-tree")
		heads = append(heads, gitT(b, repo, "commit-tree", "-p", base, "-m", fmt.Sprint("entry-", i), t))
	}
	moved := gitT(b, repo, "commit-tree", "-p", base, "-m", "moved", gitT(b, repo, "rev-parse", base+"^{tree}"))
	gitT(b, repo, "update-ref", "refs/heads/main", moved)
	return heads
}

func gitIn(b *testing.B, dir, stdin string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	require.NoError(b, err)
	return string(out)
}

func gitEnv(b *testing.B, dir string, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// BenchmarkFollowLatency: the time from a submission to a following
// merger taking it up (its "merging" step), waking on the event stream
// against polling every 500 ms as it did before, in the same run.
// Reports the mean in ms. "-2handles": the merger has a workspace handle
// of its own on the SQLite file, as a merger in another process has.
func BenchmarkFollowLatency(b *testing.B) {
	for _, mode := range []string{"poll-500ms", "event-stream", "poll-500ms-2handles", "event-stream-2handles"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			repo := newRepo(b)
			dsn := "sqlite:" + filepath.Join(b.TempDir(), "ws.db")
			ws := openDSN(b, dsn)
			m := newManager(b, ws, gitwork.Config{Repo: repo})
			mws := ws
			if strings.HasSuffix(mode, "-2handles") {
				mws = openDSN(b, dsn)
			}
			mg := newManager(b, mws, gitwork.Config{Repo: repo}).NewMerger("merger")
			mg.SetPollOnly(strings.HasPrefix(mode, "poll-"))
			taken := make(chan time.Time, 1)
			mg.SetStepHook(func(step string) {
				if step == "merging" {
					taken <- time.Now()
				}
			})
			done := make(chan gitwork.Result, 1)
			ran := make(chan error, 1)
			go func() { ran <- mg.Run(ctx, true, func(r gitwork.Result) { done <- r }) }()
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				task := claimed(b, ws, "ann", fmt.Sprint(mode, b.N, "-", i))
				w, err := m.Start(ctx, "ann", task.ID)
				require.NoError(b, err)
				writeFile(b, filepath.Join(w.Path, fmt.Sprint("f", i, ".txt")), "x\n")
				gitT(b, w.Path, "add", "-A")
				gitT(b, w.Path, "commit", "-q", "-m", "x")
				b.StartTimer()
				t0 := time.Now()
				_, err = m.Submit(ctx, "ann", task.ID)
				require.NoError(b, err)
				total += (<-taken).Sub(t0)
				r := <-done
				require.Equal(b, gitwork.StatusMerged, r.Status, r.Detail)
			}
			b.StopTimer()
			cancel()
			<-ran
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-merging")
		})
	}
}
