// Package sqlmigrate runs the numbered SQL migrations of the SQLite and
// PostgreSQL backends. Each step runs in one transaction together with the
// version it records, so a step has either happened, version and all, or
// not at all, whatever stops the process or the database part way: a store
// is never left at a version its tables do not match, and never needs
// `wsctl migrate force` after a crash.
//
// The version table keeps golang-migrate's layout (one row: version,
// dirty), which earlier releases used, so their stores open unchanged; a
// store those releases left dirty is refused, as before, until forced.
package sqlmigrate

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// Step is one migration: NNNNNN_name.up.sql and its .down.sql.
type Step struct {
	Version  uint
	Name     string // the name between the number and .up.sql
	Up, Down string // the SQL of each direction; Down may be empty
}

// Load reads the migration files of fsys, NNNNNN_name.up.sql and
// NNNNNN_name.down.sql, in version order. A file of another shape, a
// version without its up file, or two names for one version is an error.
func Load(fsys fs.FS) ([]Step, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	byVersion := map[uint]*Step{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, rest, ok := strings.Cut(name, "_")
		v, perr := strconv.ParseUint(num, 10, 32)
		base, dir, ok2 := strings.Cut(strings.TrimSuffix(rest, ".sql"), ".")
		if !ok || !ok2 || perr != nil || v == 0 || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("migrations: %s is not NNNNNN_name.up.sql or NNNNNN_name.down.sql", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		s := byVersion[uint(v)]
		if s == nil {
			s = &Step{Version: uint(v), Name: base}
			byVersion[uint(v)] = s
		}
		if s.Name != base {
			return nil, fmt.Errorf("migrations: version %d has two names, %q and %q", v, s.Name, base)
		}
		if dir == "up" {
			s.Up = string(b)
		} else {
			s.Down = string(b)
		}
	}
	steps := make([]Step, 0, len(byVersion))
	for _, s := range byVersion {
		if s.Up == "" {
			return nil, fmt.Errorf("migrations: version %d (%s) has no up file", s.Version, s.Name)
		}
		steps = append(steps, *s)
	}
	slices.SortFunc(steps, func(a, b Step) int { return cmp.Compare(a.Version, b.Version) })
	return steps, nil
}

// File is the name of the file holding step s's SQL in one direction.
func (s Step) File(up bool) string {
	dir := "down"
	if up {
		dir = "up"
	}
	return fmt.Sprintf("%06d_%s.%s.sql", s.Version, s.Name, dir)
}

// Dialect is what differs between the databases: the version table's
// statements, and the lock a step takes first in its transaction.
type Dialect struct {
	// Exists is a query answering one boolean: does the table exist.
	Exists string
	// Read reads the table's row (version, dirty); Clear deletes it.
	Read, Clear string
	// Create makes the table (golang-migrate's layout: version, dirty).
	Create string
	// Insert records a version: two placeholders, version then dirty.
	Insert string
	// Lock, if set, runs first in every step's transaction: it waits out
	// any other migration of the store and holds it off until COMMIT.
	Lock func(ctx context.Context, tx *sql.Tx) error
}

// Runner migrates one store.
type Runner struct {
	DB      *sql.DB
	Steps   []Step
	Dialect Dialect
	// BeforeCommit, if set, runs in each step's transaction once its SQL
	// and its new version are written, just before COMMIT (the crash tests
	// stop the process or the database there). An error rolls the step back.
	BeforeCommit func(ctx context.Context, version uint, up bool) error
}

// StepError is a step whose SQL failed. It rolled back whole: the store
// is at the version it was at before the step.
type StepError struct {
	Step Step
	Up   bool
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("migration %s failed: %v", e.Step.File(e.Up), e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Latest is the newest version of the steps, 0 if there are none.
func (r *Runner) Latest() uint { return Latest(r.Steps) }

// Latest is the newest version of steps (in version order, as Load gives
// them), 0 if there are none.
func Latest(steps []Step) uint {
	if len(steps) == 0 {
		return 0
	}
	return steps[len(steps)-1].Version
}

// Typed reports whether err, returned by a Runner, is already one a caller
// branches on as it is: none, a *workspace.SchemaError (a dirty version),
// a *workspace.InvalidError (a version or step count refused), or the
// context's end. Anything else (a *StepError, a failure of the database)
// is for the backend to describe.
func Typed(err error) bool {
	var (
		schemaErr  *workspace.SchemaError
		invalidErr *workspace.InvalidError
	)
	return err == nil || errors.As(err, &schemaErr) || errors.As(err, &invalidErr) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// state is what the version table says.
type state struct {
	version uint // 0: no version recorded
	dirty   bool
	table   bool // the table exists
}

func (r *Runner) read(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (state, error) {
	var st state
	if err := q.QueryRowContext(ctx, r.Dialect.Exists).Scan(&st.table); err != nil {
		return st, fmt.Errorf("read the schema version: %w", err)
	}
	if !st.table {
		return st, nil
	}
	var v int64
	err := q.QueryRowContext(ctx, r.Dialect.Read).Scan(&v, &st.dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read the schema version: %w", err)
	}
	if v > 0 {
		st.version = uint(v)
	}
	return st, nil
}

// Version is the version recorded (0 if none) and whether a migration
// of an earlier release left it dirty.
func (r *Runner) Version(ctx context.Context) (uint, bool, error) {
	st, err := r.read(ctx, r.DB)
	return st.version, st.dirty, err
}

// Up migrates to the latest version.
func (r *Runner) Up(ctx context.Context) error { return r.Goto(ctx, r.Latest()) }

// Goto migrates up or down, a step at a time, to version v (0: below
// the first step, no version).
func (r *Runner) Goto(ctx context.Context, v uint) error {
	if v != 0 && r.index(v) < 0 {
		return &workspace.InvalidError{Field: "version", Reason: fmt.Sprintf("%d: no migration has that version (the latest is %d)", v, r.Latest())}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := r.step(ctx, func(cur uint) (uint, bool, bool) {
			switch {
			case cur < v:
				return r.next(cur), true, true
			case cur > v:
				return cur, false, true
			}
			return 0, false, false
		})
		if err != nil || done {
			return err
		}
	}
}

// Down migrates n steps down (every step, when n <= 0). Asking for more
// steps than the store has below it is refused before any is taken.
func (r *Runner) Down(ctx context.Context, n int) error {
	if n <= 0 {
		return r.Goto(ctx, 0)
	}
	cur, dirty, err := r.Version(ctx)
	if err != nil || dirty {
		return r.Goto(ctx, cur) // reports the dirty version, or err
	}
	i := r.index(cur)
	if cur == 0 || i < 0 || i+1 < n {
		below := 0
		if i >= 0 && cur != 0 {
			below = i + 1
		}
		return &workspace.InvalidError{Field: "steps", Reason: fmt.Sprintf("%d: the store is at version %d, %d steps above none", n, cur, below)}
	}
	var to uint
	if i-n >= 0 {
		to = r.Steps[i-n].Version
	}
	return r.Goto(ctx, to)
}

// Force records version v, clean, running no migration (-1: no version).
// It is the way out of a dirty version an earlier release left.
func (r *Runner) Force(ctx context.Context, v int) error {
	if v < -1 || (v > 0 && r.index(uint(v)) < 0) {
		return &workspace.InvalidError{Field: "version", Reason: fmt.Sprintf("%d: want -1, 0 or a migration's version (the latest is %d)", v, r.Latest())}
	}
	return r.inTx(ctx, func(tx *sql.Tx, _ state) error {
		return r.record(ctx, tx, v)
	})
}

// index is the position of version v among the steps, -1 if none.
func (r *Runner) index(v uint) int {
	return slices.IndexFunc(r.Steps, func(s Step) bool { return s.Version == v })
}

// next is the first version above cur.
func (r *Runner) next(cur uint) uint {
	for _, s := range r.Steps {
		if s.Version > cur {
			return s.Version
		}
	}
	return cur
}

// inTx runs fn in a transaction holding the dialect's lock, with the
// version table made and read.
func (r *Runner) inTx(ctx context.Context, fn func(tx *sql.Tx, st state) error) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if r.Dialect.Lock != nil {
		if err := r.Dialect.Lock(ctx, tx); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
	}
	st, err := r.read(ctx, tx)
	if err != nil {
		return err
	}
	if !st.table {
		if _, err := tx.ExecContext(ctx, r.Dialect.Create); err != nil {
			return fmt.Errorf("create the version table: %w", err)
		}
	}
	if err := fn(tx, st); err != nil {
		return err
	}
	return tx.Commit()
}

// record replaces the version row with v, clean (-1 or 0: no row).
func (r *Runner) record(ctx context.Context, tx *sql.Tx, v int) error {
	if _, err := tx.ExecContext(ctx, r.Dialect.Clear); err != nil {
		return fmt.Errorf("record the schema version: %w", err)
	}
	if v <= 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, r.Dialect.Insert, int64(v), false); err != nil {
		return fmt.Errorf("record the schema version: %w", err)
	}
	return nil
}

// errDone ends a step's transaction that found nothing to do.
var errDone = errors.New("nothing to do")

// step takes one step in one transaction: plan, given the version read
// under the lock, names the version to go up to (up) or the version to
// go down from, or that there is nothing left to do (ok false). done
// reports the latter.
func (r *Runner) step(ctx context.Context, plan func(cur uint) (v uint, up, ok bool)) (done bool, err error) {
	err = r.inTx(ctx, func(tx *sql.Tx, st state) error {
		if st.dirty {
			return &workspace.SchemaError{Current: int64(st.version), Want: int64(r.Latest()), Dirty: true} // #nosec G115 -- schema versions are small counts
		}
		v, up, ok := plan(st.version)
		if !ok {
			return errDone
		}
		i := r.index(v)
		if i < 0 {
			return fmt.Errorf("the store is at version %d, which no migration of this binary has", st.version)
		}
		s := r.Steps[i]
		text, after := s.Up, int(s.Version) // #nosec G115 -- versions parsed as 32-bit
		if !up {
			text, after = s.Down, 0
			if i > 0 {
				after = int(r.Steps[i-1].Version) // #nosec G115 -- versions parsed as 32-bit
			}
		}
		if strings.TrimSpace(text) != "" {
			if _, err := tx.ExecContext(ctx, text); err != nil {
				return &StepError{Step: s, Up: up, Err: err}
			}
		}
		if err := r.record(ctx, tx, after); err != nil {
			return err
		}
		if r.BeforeCommit != nil {
			return r.BeforeCommit(ctx, s.Version, up)
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return true, nil
	}
	return false, err
}
