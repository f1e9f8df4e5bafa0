package procstop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Wait returns once every thread of process pid is in a stopped
// state, as /proc reports it, or ctx ends.
func Wait(ctx context.Context, pid int) error {
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func allThreadsStopped(pid int) (bool, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(stats) == 0 {
		return false, fmt.Errorf("process %d has no threads in /proc", pid)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p) // #nosec G304 -- a /proc path built from a child's pid
		if err != nil {
			return false, err
		}
		// The state is the field after the command name, which is in
		// parentheses and may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("unreadable %s: %q", p, b)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}
