package shadow

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// crashTree is a real tree and the changes made to it in a shadow: edits,
// deletions, a rename, new files in new directories, a mode change.
func crashTree(t *testing.T, e *env) Shadow {
	t.Helper()
	files := map[string]string{}
	for i := range 16 {
		files[fmt.Sprintf("d%d/f%d.txt", i%4, i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 50)
	}
	write(t, e.dir, files)
	s := e.open(t, "alice", "")
	changes := map[string]string{}
	for i := range 6 {
		changes[fmt.Sprintf("d%d/f%d.txt", i%4, i)] = fmt.Sprintf("edited %d\n", i)
	}
	for i := range 6 {
		changes[fmt.Sprintf("new/sub%d/n%d.txt", i%2, i)] = fmt.Sprintf("new %d\n", i)
	}
	write(t, s.Path, changes)
	for i := 6; i < 9; i++ {
		require.NoError(t, os.Remove(filepath.Join(s.Path, fmt.Sprintf("d%d/f%d.txt", i%4, i))))
	}
	require.NoError(t, os.Rename(filepath.Join(s.Path, "d1/f9.txt"), filepath.Join(s.Path, "d3/renamed.txt")))
	require.NoError(t, os.Chmod(filepath.Join(s.Path, "d2/f10.txt"), 0o600))
	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.True(t, v.Passed)
	return s
}

// promoteInChild promotes the shadow in a child process that kills itself
// with SIGKILL at step killAt (never, if beyond the last), and reports
// whether it was killed and how many steps it passed.
func promoteInChild(t *testing.T, e *env, s Shadow, killAt int) (killed bool, steps int) {
	t.Helper()
	stepsFile := filepath.Join(t.TempDir(), "steps")
	cmd := exec.Command(os.Args[0], "-test.run=^$") // #nosec G204 -- this test binary
	cmd.Env = append(os.Environ(),
		childEnv+"="+strings.Join([]string{e.root, e.dsn, s.ID, strconv.Itoa(killAt)}, " "),
		childSteps+"="+stepsFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "child: %v: %s", err, out)
		require.Equal(t, "signal: killed", ee.ProcessState.String(), "child: %s", out)
		return true, 0
	}
	b, err := os.ReadFile(stepsFile)
	require.NoError(t, err)
	n, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	return false, n
}

// TestPromotionSurvivesSIGKILLAtAnyStep kills a promoting process at 30
// random steps of its promotion; after recovery the real tree is, byte for
// byte and mode for mode, either the base or the fully promoted state, and
// a promotion that happened is recorded in the workspace.
func TestPromotionSurvivesSIGKILLAtAnyStep(t *testing.T) {
	// One clean run counts the steps and gives the promoted state.
	e := newEnv(t, Options{})
	s := crashTree(t, e)
	base, promoted := tree(t, e.dir), tree(t, s.Path)
	require.NotEqual(t, base, promoted)
	killed, steps := promoteInChild(t, e, s, 0)
	require.False(t, killed)
	require.Greater(t, steps, 30)
	assert.Equal(t, promoted, tree(t, e.dir))

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d, %d steps", seed, steps)
	var sawBase, sawPromoted atomic.Int32
	t.Run("kills", func(t *testing.T) {
		for i := range 30 {
			at := 1 + rng.IntN(steps)
			t.Run(fmt.Sprintf("step%d", at), func(t *testing.T) {
				t.Parallel() // the runs share nothing but the store
				e := e.another(t)
				s := crashTree(t, e)
				killed, _ := promoteInChild(t, e, s, at)
				require.True(t, killed, "run %d: kill at step %d of %d", i, at, steps)
				require.NoError(t, e.m.Recover(e.ctx, e.dir))
				got := tree(t, e.dir)
				switch {
				case assert.ObjectsAreEqual(base, got):
					sawBase.Add(1)
					// Undone: the same promotion can be made again, and completes.
					_, err := e.m.Promote(e.ctx, s.ID, "")
					require.NoError(t, err, "run %d", i)
					assert.Equal(t, promoted, tree(t, e.dir))
				case assert.ObjectsAreEqual(promoted, got):
					sawPromoted.Add(1)
					page, err := e.ws.Artifacts().List(e.ctx, workspace.ArtifactFilter{Kind: DiffArtifactKind, Labels: map[string]string{"shadow": s.ID}})
					require.NoError(t, err)
					assert.Len(t, page.Artifacts, 1, "run %d (seed %d, step %d): the promotion is recorded once", i, seed, at)
					d, err := e.m.Diff(e.ctx, s.ID)
					require.NoError(t, err)
					assert.Empty(t, d.Changes, "run %d: the shadow's base moved to the promoted state", i)
				default:
					t.Fatalf("run %d (seed %d): killed at step %d of %d, the tree is neither base nor promoted:\n%v", i, seed, at, steps, got)
				}
			})
		}
	})
	t.Logf("after recovery: %d base, %d promoted", sawBase.Load(), sawPromoted.Load())
	assert.Positive(t, sawBase.Load())
	assert.Positive(t, sawPromoted.Load())
}
