//go:build unix

package procstop

import (
	"context"
	"syscall"
)

// Stop sends process pid SIGSTOP and returns once it has stopped (Wait):
// the signal alone only queues the stop.
func Stop(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	return Wait(ctx, pid)
}
