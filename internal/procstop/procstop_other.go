//go:build unix && !linux

package procstop

import (
	"context"
	"time"
)

// Wait waits a while for process pid to stop: without /proc there is
// no portable way to see that a SIGSTOP has taken effect short of wait(2),
// which would race the exec package's own wait for the child's exit.
func Wait(ctx context.Context, _ int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}
