package shadow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A promotion is made crash-safe by a journal kept per real directory
// under Root/dirs/KEY/. The invariant: while plan.json exists (and
// commit.json does not) nothing in the real tree but staged files and
// directories it lists has changed, so undoing is removing them; once
// commit.json exists every staged file is complete and synced, so
// finishing is renaming each over its target and removing deletions,
// which is idempotent. Readers and writers of the real tree hold the
// directory's flock (shared or exclusive), taken only after recovery.

// journal is a promotion's plan: what to stage, where, and what to record.
type journal struct {
	Promotion string    `json:"promotion"`
	Shadow    string    `json:"shadow"`
	Dir       string    `json:"dir"`
	Actor     string    `json:"actor"`        // whose work it is
	By        string    `json:"by,omitempty"` // who records it, when not Actor
	Ops       []jop     `json:"ops"`
	MadeDirs  []string  `json:"made_dirs"` // directories staging creates, parents first
	Diff      Diff      `json:"diff"`
	Unified   string    `json:"unified"`
	At        time.Time `json:"at"`
}

// jop is one path of a promotion: a staged file renamed over Path, or a
// removal of Path.
type jop struct {
	Path   string `json:"path"`
	Stage  string `json:"stage,omitempty"`
	Delete bool   `json:"delete,omitempty"`
	Entry  *Entry `json:"entry,omitempty"`
}

// dirKey names the state directory of a real directory.
func (m *Manager) dirState(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return filepath.Join(m.opts.Root, "dirs", hex.EncodeToString(h[:12]))
}

// crashPoint, when set (by tests), is called at every step of a promotion
// that changes the disk; a test child kills itself there.
var crashPoint func()

func step() {
	if crashPoint != nil {
		crashPoint()
	}
}

// withDir runs fn holding the real directory's lock, exclusive when
// writing, after finishing or undoing any promotion a crash cut.
func (m *Manager) withDir(ctx context.Context, dir string, exclusive bool, fn func() error) error {
	st := m.dirState(dir)
	if err := os.MkdirAll(st, 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(st, "lock"), os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- this package's own state file
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if err := flock(ctx, f, unix.LOCK_EX); err != nil {
			return err
		}
		if err := m.recover(ctx, st); err != nil {
			return err
		}
		if exclusive {
			return fn()
		}
		if err := flock(ctx, f, unix.LOCK_SH); err != nil {
			return err
		}
		// Between the two flocks a writer may have come and died: look again.
		if !pending(st) {
			return fn()
		}
	}
}

// pending reports whether a promotion's journal is in st.
func pending(st string) bool {
	for _, name := range []string{"plan.json", "commit.json"} {
		if _, err := os.Lstat(filepath.Join(st, name)); err == nil {
			return true
		}
	}
	return false
}

// flock takes (or converts) the lock, polling so that ctx is honoured.
func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Recover finishes or undoes a promotion of dir that a crash cut. Every
// call that reads or writes the real tree does this first; it is exported
// for programs that want the tree whole before reading it themselves.
func (m *Manager) Recover(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return m.withDir(ctx, dir, true, func() error { return nil })
}

// recover runs under the exclusive lock.
func (m *Manager) recover(ctx context.Context, st string) error {
	commit, plan := filepath.Join(st, "commit.json"), filepath.Join(st, "plan.json")
	if j, err := readJournal(commit); err == nil {
		return m.finish(ctx, st, j)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	j, err := readJournal(plan)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := undo(j); err != nil {
		return err
	}
	if err := os.Remove(plan); err != nil {
		return err
	}
	return syncDir(st)
}

func readJournal(p string) (journal, error) {
	var j journal
	b, err := os.ReadFile(p) // #nosec G304 -- this package's own journal
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, fmt.Errorf("promotion journal %s is corrupt: %w", p, err)
	}
	return j, nil
}

// undo removes what staging made: staged files, then made directories
// (deepest first, only if empty).
func undo(j journal) error {
	root, err := os.OpenRoot(j.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, op := range j.Ops {
		if op.Stage != "" {
			if err := root.Remove(op.Stage); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("undo promotion %s: %w", j.Promotion, err)
			}
		}
	}
	for _, d := range slices.Backward(j.MadeDirs) {
		_ = root.Remove(d) // fails, rightly, if something else lives there now
	}
	return nil
}

// apply renames every staged file over its target and removes deletions;
// run again after a crash it does what is left.
func apply(j journal) error {
	root, err := os.OpenRoot(j.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	dirs := map[string]bool{}
	for _, op := range j.Ops {
		switch {
		case op.Delete:
			if err := root.Remove(op.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("promote %s: %w", op.Path, err)
			}
		default:
			if _, err := root.Lstat(op.Stage); errors.Is(err, fs.ErrNotExist) {
				continue // renamed before the crash
			}
			if err := root.Rename(op.Stage, op.Path); err != nil {
				return fmt.Errorf("promote %s: %w", op.Path, err)
			}
		}
		step()
		dirs[filepath.Dir(filepath.FromSlash(op.Path))] = true
	}
	for d := range dirs {
		if err := syncDir(filepath.Join(j.Dir, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// finish completes a committed promotion: the renames, its record in the
// workspace (idempotent by the promotion's id), the shadow's new base,
// then the journal's removal.
func (m *Manager) finish(ctx context.Context, st string, j journal) error {
	if err := apply(j); err != nil {
		return err
	}
	if err := m.recordPromotion(ctx, j); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(st, "commit.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	step()
	return syncDir(st)
}
