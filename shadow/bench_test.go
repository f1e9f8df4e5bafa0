package shadow

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentspace/agentspace/workspace"
)

// benchFiles and benchFileSize size the benchmark tree; set
// AGENTSPACE_SHADOW_BENCH_FILES and AGENTSPACE_SHADOW_BENCH_KB for a
// bigger one (the figures in docs/shadows.md use 20000 and 10).
func benchTreeSize(b *testing.B) (files, kb int) {
	files, kb = 2000, 10
	if v := os.Getenv("AGENTSPACE_SHADOW_BENCH_FILES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		files = n
	}
	if v := os.Getenv("AGENTSPACE_SHADOW_BENCH_KB"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		kb = n
	}
	return files, kb
}

// benchTree writes files of kb KiB each, 100 to a directory.
func benchTree(b *testing.B, dir string, files, kb int) {
	b.Helper()
	buf := make([]byte, kb<<10)
	for i := range files {
		for j := range buf {
			buf[j] = byte('a' + (i+j)%26)
		}
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.txt", i))
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(b, os.WriteFile(p, buf, 0o644))
	}
}

// benchEnv is newEnv in AGENTSPACE_SHADOW_BENCH_DIR when set (a file
// system to measure on, e.g. one with reflinks), else in a temp dir.
func benchEnv(b *testing.B) *env {
	b.Helper()
	var e *env
	if dir := os.Getenv("AGENTSPACE_SHADOW_BENCH_DIR"); dir != "" {
		e = newEnvIn(b, tempIn(b, dir), Options{})
	} else {
		e = newEnv(b, Options{})
	}
	e.ctx = context.Background() // building a big tree can outlast a test's deadline
	return e
}

// BenchmarkOpen measures Open of a tree (built once) against `cp -a` of
// the same tree, interleaved in the same run; reported: the time and MB/s
// of each and their ratio, and whether the file system has reflinks (then
// cp -a clones too: coreutils' --reflink=auto).
func BenchmarkOpen(b *testing.B) {
	files, kb := benchTreeSize(b)
	e := benchEnv(b)
	benchTree(b, e.dir, files, kb)
	mb := float64(files*kb) / 1024
	reflinks, err := ReflinksAvailable(filepath.Dir(e.dir))
	require.NoError(b, err)
	b.Run("interleaved", func(b *testing.B) {
		var cpTime, openTime, cpCPU, openCPU time.Duration
		for i := 0; i < b.N; i++ {
			dst := filepath.Join(filepath.Dir(e.dir), "cp")
			c0 := cpuTime(unix.RUSAGE_CHILDREN)
			t0 := time.Now()
			out, err := exec.Command("cp", "-a", e.dir, dst).CombinedOutput()
			require.NoError(b, err, "%s", out)
			cpTime += time.Since(t0)
			cpCPU += cpuTime(unix.RUSAGE_CHILDREN) - c0
			require.NoError(b, os.RemoveAll(dst))

			c0 = cpuTime(unix.RUSAGE_SELF)
			t0 = time.Now()
			s, err := e.m.Open(e.ctx, OpenRequest{Dir: e.dir, Actor: "bench"})
			require.NoError(b, err)
			openTime += time.Since(t0)
			openCPU += cpuTime(unix.RUSAGE_SELF) - c0
			require.Equal(b, reflinks, s.Reflinked)
			_, err = e.m.Discard(e.ctx, s.ID, "", false)
			require.NoError(b, err)
		}
		b.ReportMetric(openTime.Seconds()*1000/float64(b.N), "open-ms")
		b.ReportMetric(cpTime.Seconds()*1000/float64(b.N), "cp-a-ms")
		b.ReportMetric(openCPU.Seconds()*1000/float64(b.N), "open-cpu-ms")
		b.ReportMetric(cpCPU.Seconds()*1000/float64(b.N), "cp-a-cpu-ms")
		b.ReportMetric(mb*float64(b.N)/openTime.Seconds(), "open-MB/s")
		b.ReportMetric(mb*float64(b.N)/cpTime.Seconds(), "cp-a-MB/s")
		b.ReportMetric(openTime.Seconds()/cpTime.Seconds(), "open/cp-a")
		b.ReportMetric(map[bool]float64{true: 1}[reflinks], "reflinks")
	})
}

// changed50 opens a shadow of the tree and changes 50 of its files.
func changed50(b *testing.B, e *env) Shadow {
	b.Helper()
	s, err := e.m.Open(e.ctx, OpenRequest{Dir: e.dir, Actor: "bench"})
	require.NoError(b, err)
	for i := range 50 {
		p := filepath.Join(s.Path, fmt.Sprintf("d%03d", i%10), fmt.Sprintf("f%05d.txt", (i%10)*100+i/10))
		require.NoError(b, os.WriteFile(p, []byte(fmt.Sprintf("changed %d\n", i)), 0o644))
	}
	return s
}

// BenchmarkDiffValidate50 measures Diff plus ValidateDiff of a shadow with
// 50 changed files (the tree's size as for BenchmarkOpen), warm, built
// once; each iteration also times, interleaved so that load hits all
// alike, the baselines: Diff then Validate (two scans, as two wsctl calls
// make), a bare walk that lstats every file of the shadow, and `git
// status` of the shadow against a git index of the base.
func BenchmarkDiffValidate50(b *testing.B) {
	files, kb := benchTreeSize(b)
	e := benchEnv(b)
	benchTree(b, e.dir, files, kb)
	s := changed50(b, e)
	git := gitBaseline(b, e.dir, s.Path)
	// The first diff hashes the 50 changed files (Open's scan cached the
	// rest); after it, only files whose inode, size, times or mode moved
	// are hashed again.
	time.Sleep(racyMargin(false))
	t0 := time.Now()
	_, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(b, err)
	first := time.Since(t0)
	b.Run("interleaved", func(b *testing.B) {
		var dv, twoScans, walk, gitStatus time.Duration
		var dvCPU, twoCPU, walkCPU, gitCPU time.Duration
		for i := 0; i < b.N; i++ {
			c0 := cpuTime(unix.RUSAGE_SELF)
			t0 := time.Now()
			d, err := e.m.Diff(e.ctx, s.ID)
			require.NoError(b, err)
			require.Len(b, d.Changes, 50)
			v, err := e.m.ValidateDiff(e.ctx, s.ID, "", d)
			require.NoError(b, err)
			require.True(b, v.Passed)
			dv += time.Since(t0)
			dvCPU += cpuTime(unix.RUSAGE_SELF) - c0

			c0 = cpuTime(unix.RUSAGE_SELF)
			t0 = time.Now()
			_, err = e.m.Diff(e.ctx, s.ID)
			require.NoError(b, err)
			v, err = e.m.Validate(e.ctx, s.ID, "")
			require.NoError(b, err)
			require.True(b, v.Passed)
			twoScans += time.Since(t0)
			twoCPU += cpuTime(unix.RUSAGE_SELF) - c0

			c0 = cpuTime(unix.RUSAGE_SELF)
			t0 = time.Now()
			n := 0
			require.NoError(b, filepath.WalkDir(s.Path, func(p string, d fs.DirEntry, err error) error {
				if err == nil {
					_, err = os.Lstat(p)
					n++
				}
				return err
			}))
			walk += time.Since(t0)
			walkCPU += cpuTime(unix.RUSAGE_SELF) - c0
			require.Greater(b, n, files)

			c0 = cpuTime(unix.RUSAGE_CHILDREN)
			t0 = time.Now()
			out := git("status", "--porcelain")
			gitStatus += time.Since(t0)
			gitCPU += cpuTime(unix.RUSAGE_CHILDREN) - c0
			require.Equal(b, 50, strings.Count(out, "\n"), out)
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
		b.ReportMetric(per(dv), "diff+validate-ms")
		b.ReportMetric(per(twoScans), "diff,validate-ms")
		b.ReportMetric(per(walk), "walk-lstat-ms")
		b.ReportMetric(per(gitStatus), "git-status-ms")
		b.ReportMetric(dv.Seconds()/walk.Seconds(), "dv/walk")
		b.ReportMetric(dv.Seconds()/gitStatus.Seconds(), "dv/git")
		b.ReportMetric(per(dvCPU), "diff+validate-cpu-ms")
		b.ReportMetric(per(twoCPU), "diff,validate-cpu-ms")
		b.ReportMetric(per(walkCPU), "walk-lstat-cpu-ms")
		b.ReportMetric(per(gitCPU), "git-status-cpu-ms")
		b.ReportMetric(float64(first.Milliseconds()), "first-diff-ms")
	})
}

// cpuTime is the user plus system CPU time of this process (who:
// RUSAGE_SELF) or of its waited-for children (RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gitBaseline makes a git index of base (its files committed, the git
// directory outside both trees) and returns a runner of git commands
// against shadow as the work tree; it runs one status, which refreshes
// the index's stat data for the shadow's files, as the stat cache is.
func gitBaseline(b *testing.B, base, shadow string) func(args ...string) string {
	b.Helper()
	gd := filepath.Join(b.TempDir(), "git")
	run := func(tree string, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + gd, "--work-tree=" + tree, "-c", "user.name=b", "-c", "user.email=b@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(b, err, "git %v: %s", args, out)
		return string(out)
	}
	require.NoError(b, exec.Command("git", "init", "-q", "--bare", gd).Run())
	require.NoError(b, exec.Command("git", "--git-dir="+gd, "config", "core.bare", "false").Run())
	run(base, "add", "-A")
	run(base, "commit", "-q", "-m", "base")
	run(shadow, "status", "--porcelain")
	return func(args ...string) string { return run(shadow, args...) }
}

// BenchmarkPromote50 measures Promote of 50 changed files (validated
// before the timer runs), against writing the same 50 files in place.
func BenchmarkPromote50(b *testing.B) {
	files, kb := benchTreeSize(b)
	e := newEnv(b, Options{})
	e.ctx = context.Background() // building a big tree can outlast a test's deadline
	benchTree(b, e.dir, files, kb)
	var promote, plain time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := changed50(b, e)
		v, err := e.m.Validate(e.ctx, s.ID, "")
		require.NoError(b, err)
		require.True(b, v.Passed)
		b.StartTimer()
		t0 := time.Now()
		p, err := e.m.Promote(e.ctx, s.ID, "")
		require.NoError(b, err)
		require.Len(b, p.Diff.Changes, 50)
		promote += time.Since(t0)
		b.StopTimer()
		// The baseline: the same 50 writes straight into the tree, synced.
		t0 = time.Now()
		for _, c := range p.Diff.Changes {
			f, err := os.Create(filepath.Join(e.dir, c.Path))
			require.NoError(b, err)
			_, err = f.WriteString("plain\n")
			require.NoError(b, err)
			require.NoError(b, f.Sync())
			require.NoError(b, f.Close())
		}
		plain += time.Since(t0)
		_, err = e.m.Discard(e.ctx, s.ID, "", false)
		require.NoError(b, err)
		b.StartTimer()
	}
	b.ReportMetric(float64(promote.Milliseconds())/float64(b.N), "promote-ms")
	b.ReportMetric(promote.Seconds()/plain.Seconds(), "promote/plain-writes")
}

// BenchmarkValidate50Policy measures Validate of 50 changed files with no
// policy stored, then with a 50-rule policy whose last rule grants them:
// the cost of checking each path's role, as a ratio of the first.
func BenchmarkValidate50Policy(b *testing.B) {
	e := newEnv(b, Options{})
	e.ctx = context.Background()
	benchTree(b, e.dir, 1000, 1)
	s := changed50(b, e)
	validate := func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v, err := e.m.Validate(e.ctx, s.ID, "")
			require.NoError(b, err)
			require.True(b, v.Passed, "%v", v.Violations)
		}
	}
	b.Run("no-policy", validate)
	var pol strings.Builder
	for i := range 49 {
		fmt.Fprintf(&pol, "[roles.r%02d]\nartifacts_write = [\"area%02d/**\"]\n", i, i)
	}
	pol.WriteString("[roles.writer]\nartifacts_write = [\"d*/**\", \"shadows/**\"]\nnotes_write = [\"shadow\"]\n[actors]\nroot = [\"admin\"]\nbench = [\"writer\"]\n")
	_, err := e.ws.Artifacts().Create(e.ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(pol.String())})
	require.NoError(b, err)
	b.Run("policy-50-rules", validate)
}
