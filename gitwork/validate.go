package gitwork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// validate runs the configured commands in a clean checkout of cand. It
// reports whether all passed and, if not, the failing command's output.
func (mg *Merger) validate(ctx context.Context, cand string) (bool, string, error) {
	if len(mg.m.cfg.Validate) == 0 {
		return true, "", nil
	}
	var ok bool
	_, out, err := withCheckout(ctx, mg.m.git, cand, func(dir string) (string, string, error) {
		for _, c := range mg.m.cfg.Validate {
			pass, out, err := runValidator(ctx, dir, c, cand, mg.m.cfg.ValidateTimeout)
			if err != nil {
				return "", "", err
			}
			if !pass {
				return "", out, nil
			}
		}
		ok = true
		return "", "", nil
	})
	return ok, out, err
}

// runValidator runs one shell command in its own process group, killed
// whole at the timeout.
func runValidator(ctx context.Context, dir, command, cand string, timeout time.Duration) (bool, string, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command("sh", "-c", command) // #nosec G204 -- the validation commands come from the operator's config
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTSPACE_MERGE_CANDIDATE="+cand)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return false, "", fmt.Errorf("validation %q: %w", command, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		if parent.Err() != nil {
			return false, "", fmt.Errorf("validation %q: %w", command, context.Cause(parent))
		}
		return false, fmt.Sprintf("$ %s\n%s\ntimed out after %s", command, tail(out.String()), timeout), nil
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return false, fmt.Sprintf("$ %s\n%s\nexit %d", command, tail(out.String()), ee.ExitCode()), nil
		}
		return false, "", fmt.Errorf("validation %q: %w", command, err)
	}
	return true, "", nil
}

func tail(s string) string {
	const n = 8 << 10
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
