package gitwork_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentspace/agentspace/gitwork"
)

// TestWorktreeAddSurvivesAConcurrentPrune adds worktrees one after another
// while another agent keeps running `git worktree prune`, as a merger and
// the other agents do: unguarded, prune removes the worktrees/NAME an add
// has just made (or an empty .git/worktrees) and that add fails with "could
// not create directory" or "could not open .../gitdir". Every add must
// succeed, with no retry needed: the package's worktree lock orders them.
func TestWorktreeAddSurvivesAConcurrentPrune(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	start := gitT(t, repo, "rev-parse", "HEAD")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = gitwork.PruneWorktrees(ctx, repo)
		}
	}()
	root := filepath.Join(t.TempDir(), "wt")
	var adders sync.WaitGroup
	errs := make(chan error, 24)
	for a := range 3 {
		adders.Add(1)
		go func() {
			defer adders.Done()
			for i := range 8 {
				path := filepath.Join(root, fmt.Sprintf("%d-%d", a, i))
				err := gitwork.AddWorktree(ctx, repo, path, fmt.Sprintf("b%d-%d", a, i), start)
				if err == nil {
					// Leave .git/worktrees empty again, the state the race needs.
					err = gitwork.RemoveWorktree(ctx, repo, path)
				}
				if err != nil {
					errs <- fmt.Errorf("add %d-%d: %w", a, i, err)
				}
			}
		}()
	}
	adders.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	close(stop)
	wg.Wait()
}
