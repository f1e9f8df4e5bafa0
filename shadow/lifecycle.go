package shadow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Discarded is what Discard did.
type Discarded struct {
	Shadow   string   `json:"shadow"`
	Reverted []string `json:"reverted,omitempty"` // with OnlyViolations: the paths set back
	Removed  bool     `json:"removed"`            // the whole shadow was dropped
}

// Discard drops the shadow (its copy and manifest), recorded as
// shadow.discarded. With onlyViolations it instead sets back, in the
// shadow, every path the last validation found breaking a rule, to the
// real tree's current file (its base moving along), and keeps the rest;
// the shadow then needs a new validation.
func (m *Manager) Discard(ctx context.Context, ref, actor string, onlyViolations bool) (Discarded, error) {
	md, err := m.load(ref)
	if err != nil {
		return Discarded{}, err
	}
	if actor == "" {
		actor = md.Actor
	}
	if !onlyViolations {
		md.State = StateDiscarded
		if err := m.record(ctx, md, actor, EventDiscarded, ""); err != nil {
			return Discarded{}, err
		}
		return Discarded{Shadow: md.ID, Removed: true}, os.RemoveAll(filepath.Join(m.opts.Root, md.ID))
	}
	if md.Validated == nil {
		return Discarded{}, fmt.Errorf("shadow %s: %w: validate first, so there are violations to revert", md.ID, workspace.ErrInvalid)
	}
	bad := map[string]bool{}
	for _, v := range md.Validated.Violations {
		if v.Path != "" {
			bad[v.Path] = true
		}
	}
	out := Discarded{Shadow: md.ID}
	err = m.withDir(ctx, md.Dir, false, func() error {
		for p := range bad {
			if err := m.resetPath(&md, p); err != nil {
				return err
			}
			out.Reverted = append(out.Reverted, p)
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	md.Validated = nil
	if err := m.saveMeta(md, true); err != nil {
		return out, err
	}
	return out, m.record(ctx, md, actor, EventDiscarded, fmt.Sprintf("only violations: %d paths reverted", len(out.Reverted)))
}

// resetPath makes the shadow's p (and its base entry) the real tree's
// current p: a copy of it, or nothing if the real tree has none.
func (m *Manager) resetPath(md *meta, p string) error {
	if !fs.ValidPath(p) {
		return fmt.Errorf("%w: %q", ErrUnsafePath, p)
	}
	real, err := os.OpenRoot(md.Dir)
	if err != nil {
		return err
	}
	defer real.Close()
	sh, err := os.OpenRoot(md.Path)
	if err != nil {
		return err
	}
	defer sh.Close()
	if err := sh.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	delete(md.Base, p)
	e, err := realEntry(real, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkParents(sh, p); err != nil {
		return err
	}
	if d := path.Dir(p); d != "." {
		if err := sh.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if e.isLink() {
		if err := sh.Symlink(e.Link, p); err != nil {
			return err
		}
	} else {
		ok := true
		if _, _, err := copyFile(filepath.Join(md.Dir, filepath.FromSlash(p)), filepath.Join(md.Path, filepath.FromSlash(p)), &ok); err != nil {
			return err
		}
	}
	md.Base[p] = e
	return nil
}

// Rebased is what Rebase did.
type Rebased struct {
	Shadow    string   `json:"shadow"`
	Refreshed []string `json:"refreshed"` // paths taken from the real tree into the shadow and its base
	Conflicts []string `json:"conflicts"` // paths changed on both sides: left as they are
}

// Rebase moves the shadow's base to the real tree's current state for
// every path the shadow did not change (or changed just as the real tree
// did), so those stop being conflicts; paths changed differently on both
// sides are listed and left alone.
func (m *Manager) Rebase(ctx context.Context, ref, actor string) (Rebased, error) {
	md, err := m.load(ref)
	if err != nil {
		return Rebased{}, err
	}
	if actor == "" {
		actor = md.Actor
	}
	out := Rebased{Shadow: md.ID}
	err = m.withDir(ctx, md.Dir, false, func() error {
		cur, _, err := md.scanShadow()
		if err != nil {
			return err
		}
		if err := md.resolveBase(cur, true); err != nil { // every path is compared
			return err
		}
		realM, _, err := scan(md.Dir)
		if err != nil {
			return err
		}
		paths := map[string]bool{}
		for p := range realM {
			paths[p] = true
		}
		for p := range md.Base {
			paths[p] = true
		}
		for p := range paths {
			rv, inReal := realM[p]
			bv, inBase := md.Base[p]
			if inReal == inBase && rv == bv {
				continue // unchanged in the real tree
			}
			sv, inShadow := cur[p]
			if inShadow == inReal && sv == rv {
				// Both sides made the same change: it is the base now.
				if inReal {
					md.Base[p] = rv
				} else {
					delete(md.Base, p)
				}
				out.Refreshed = append(out.Refreshed, p)
				continue
			}
			if inShadow != inBase || sv != bv {
				out.Conflicts = append(out.Conflicts, p)
				continue
			}
			if err := m.resetPath(&md, p); err != nil {
				return err
			}
			out.Refreshed = append(out.Refreshed, p)
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	md.Validated = nil
	if err := m.saveMeta(md, true); err != nil {
		return out, err
	}
	return out, m.record(ctx, md, actor, EventRebased, fmt.Sprintf("%d refreshed, %d conflicts", len(out.Refreshed), len(out.Conflicts)))
}

// GCRequest is what GC takes.
type GCRequest struct {
	Actor string
	// Age is how long a shadow's task must have ended, or its owner's claim
	// have lapsed, or (without a task) the shadow have been idle, before it
	// is removed.
	Age time.Duration
}

// GC removes stale shadows, each recorded as shadow.discarded: those whose
// task ended (done, failed, cancelled) or whose claim lapsed more than Age
// ago, and those without a task (or whose task waits unclaimed) untouched
// for longer than Age. A shadow
// with a promotion being recovered is left for the next run.
func (m *Manager) GC(ctx context.Context, req GCRequest) ([]string, error) {
	shadows, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	now := m.opts.Now()
	var removed []string
	for _, s := range shadows {
		stale, err := m.stale(ctx, s, now, req.Age)
		if err != nil {
			return removed, err
		}
		if !stale {
			continue
		}
		if _, err := m.Discard(ctx, s.ID, req.Actor, false); err != nil {
			return removed, err
		}
		removed = append(removed, s.ID)
	}
	return removed, nil
}

func (m *Manager) stale(ctx context.Context, s Shadow, now time.Time, age time.Duration) (bool, error) {
	idle := func() (bool, error) {
		info, err := os.Stat(filepath.Join(m.opts.Root, s.ID, "meta.json"))
		if err != nil {
			return false, err
		}
		return now.Sub(info.ModTime()) > age, nil
	}
	if s.Task == "" {
		return idle()
	}
	t, err := m.ws.Tasks().Get(ctx, s.Task)
	if errors.Is(err, workspace.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	switch t.Status {
	case workspace.TaskDone, workspace.TaskFailed, workspace.TaskCancelled:
		return now.Sub(t.UpdatedAt) > age, nil
	case workspace.TaskInProgress:
		if t.Assignee != s.Actor {
			return now.Sub(t.UpdatedAt) > age, nil // the claim passed to someone else
		}
		return !t.LeaseExpiresAt.IsZero() && now.Sub(t.LeaseExpiresAt) > age, nil
	}
	return idle() // pending or blocked: no live claim holds the shadow
}
