package team

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Recheck checks a finished run's invariants again from what it left in
// dir (run.json, agents/*.jsonl, report.json) against dsn's workspace as it
// is now, following the run's stretch of the log afresh, and rewrites
// report.json and report.md with the result. Its error wraps ErrInvariant
// when one fails: a record edited to claim a write the store never made,
// or a write removed since, shows here.
func Recheck(ctx context.Context, dsn, dir string) (*Report, error) {
	var m meta
	if err := readJSON(filepath.Join(dir, "run.json"), &m); err != nil {
		return nil, err
	}
	var rep Report
	if err := readJSON(filepath.Join(dir, "report.json"), &rep); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "agents", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, name := range files {
		f, err := os.Open(name) // #nosec G304 -- the run's own record files
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("team: %s: %w", name, err)
			}
			if r.Op != opReady {
				recs = append(recs, r)
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Logger: slog.New(slog.DiscardHandler), MustExist: true})
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	fol := newFollower(ws, m.Head0)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); fol.run(fctx) }()
	fol.waitFor(ctx, m.Head, 2*time.Minute)
	cancel()
	<-done
	// What only the run could see (its agents' exits) stays as it found it.
	var kept []Invariant
	for _, inv := range rep.Invariants {
		if inv.Name == agentsExited {
			kept = append(kept, inv)
		}
	}
	rep.Invariants = append(kept, checkAll(ctx, ws, m, recs, fol, nil)...)
	rep.OK = true
	for _, inv := range rep.Invariants {
		rep.OK = rep.OK && inv.OK
	}
	if err := rep.write(dir, nil); err != nil {
		return &rep, err
	}
	if !rep.OK {
		return &rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.failed(), "; "))
	}
	return &rep, nil
}

func readJSON(name string, v any) error {
	b, err := os.ReadFile(name) // #nosec G304 -- the run's own files
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
