package shadow

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// prefixPolicy is a real PathPolicy: each actor may write the resources
// under its prefixes, and nothing else.
type prefixPolicy map[string][]string

func (p prefixPolicy) CheckPath(_ context.Context, actor, resource string) error {
	for _, pre := range p[actor] {
		if strings.HasPrefix(resource, pre) {
			return nil
		}
	}
	return errors.New("role of " + actor + " may not write " + resource)
}

// violated lists "rule path" for each violation.
func violated(v Validation) []string {
	var out []string
	for _, x := range v.Violations {
		out = append(out, x.Rule+" "+x.Path)
	}
	slices.Sort(out)
	return out
}

func TestEachRuleRejectsWhatItMustAndOnlyThat(t *testing.T) {
	files := map[string]string{"api/a.go": "a", "api/b.go": "b", "docs/r.md": "r", "web/x.js": "x", "locked/l.txt": "l", "held.txt": "h"}
	cases := []struct {
		name  string
		opts  Options
		areas string
		setup func(t *testing.T, e *env)
		want  []string
	}{
		{name: "no rules", want: nil},
		{name: "areas", areas: "api/,docs/*.md", want: []string{"area held.txt", "area locked/l.txt", "area web/x.js"}},
		{name: "roles", opts: Options{Policy: prefixPolicy{"alice": {"file:api/", "file:docs/", "file:locked/", "file:held"}}}, want: []string{"role web/x.js"}},
		{name: "leases", setup: func(t *testing.T, e *env) {
			for _, l := range []struct{ res, owner string }{{"file:held.txt", "bob"}, {"file:locked/", "bob"}, {"file:api/a.go", "alice"}, {"file:docs", "carol"}} {
				_, err := e.ws.Locks().Acquire(e.ctx, workspace.AcquireRequest{Resource: l.res, Owner: l.owner, TTL: time.Hour})
				require.NoError(t, err)
			}
			_, err := e.ws.Locks().Acquire(e.ctx, workspace.AcquireRequest{Resource: "file:web/x.js", Owner: "dave", TTL: time.Millisecond})
			require.NoError(t, err)
			time.Sleep(5 * time.Millisecond) // dave's lease lapses: it binds no one
		}, want: []string{"lease docs/r.md", "lease held.txt", "lease locked/l.txt"}},
		{name: "commands", opts: Options{Validators: []string{"true", "test -f api/a.go && grep -q changed api/a.go", "echo nope >&2; exit 3", "sleep 60"}, ValidatorTimeout: 5 * time.Second}, want: []string{"command ", "command "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.opts)
			write(t, e.dir, files)
			task := ""
			if c.areas != "" {
				tk, err := e.ws.Tasks().Create(e.ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t", Areas: strings.Split(c.areas, ",")})
				require.NoError(t, err)
				task = tk.ID
			}
			if c.setup != nil {
				c.setup(t, e)
			}
			s := e.open(t, "alice", task)
			changed := map[string]string{}
			for p := range files {
				changed[p] = "changed"
			}
			write(t, s.Path, changed)
			v, err := e.m.Validate(e.ctx, s.ID, "")
			require.NoError(t, err)
			assert.Equal(t, c.want, violated(v))
			assert.Equal(t, len(c.want) == 0, v.Passed)
			if c.name == "commands" {
				assert.Contains(t, v.Violations[0].Detail+v.Violations[1].Detail, "nope")
				assert.Contains(t, v.Violations[0].Detail+v.Violations[1].Detail, "timed out")
			}
			_, err = e.m.Promote(e.ctx, s.ID, "")
			if len(c.want) > 0 {
				assert.ErrorIs(t, err, ErrNotValidated)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestDiscardOnlyViolationsKeepsTheRest(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"api/a.go": "a", "web/x.js": "x"})
	tk, err := e.ws.Tasks().Create(e.ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t", Areas: []string{"api/"}})
	require.NoError(t, err)
	s := e.open(t, "alice", tk.ID)
	write(t, s.Path, map[string]string{"api/a.go": "A", "api/new.go": "N", "web/x.js": "X", "web/new.js": "Y"})
	require.NoError(t, os.Remove(filepath.Join(s.Path, "web/x.js")))
	_, err = e.m.Discard(e.ctx, s.ID, "", true)
	assert.ErrorIs(t, err, workspace.ErrInvalid, "nothing validated yet")

	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"area web/new.js", "area web/x.js"}, violated(v))
	out, err := e.m.Discard(e.ctx, s.ID, "", true)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"web/new.js", "web/x.js"}, out.Reverted)
	assert.False(t, out.Removed)
	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"api/a.go", "api/new.go"}, d.Paths())
	e.validPromote(t, s)
	assert.Equal(t, map[string]string{"api/a.go": "644:A", "api/new.go": "644:N", "web/x.js": "644:x"}, tree(t, e.dir))
}

func TestHostilePathsNeverReachOutsideTheRealTree(t *testing.T) {
	e := newEnv(t, Options{})
	outside := filepath.Join(filepath.Dir(e.dir), "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	write(t, outside, map[string]string{"secret": "s"})
	write(t, e.dir, map[string]string{"ok.txt": "ok"})
	require.NoError(t, os.Symlink(outside, filepath.Join(e.dir, "out"))) // a link out, in the real tree itself
	require.NoError(t, syscall.Mkfifo(filepath.Join(e.dir, "fifo"), 0o644))
	s := e.open(t, "alice", "")
	assert.Equal(t, []Skipped{{Path: "fifo", Reason: "special file (p---------)"}}, s.Skipped, "a fifo is never copied (nor read: open does not hang)")
	realBefore, outsideBefore := tree(t, e.dir), tree(t, outside)

	t.Run("links out of the tree, special and unreadable files are violations", func(t *testing.T) {
		require.NoError(t, os.Symlink("../../../../etc/passwd", filepath.Join(s.Path, "climb")))
		require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(s.Path, "abs")))
		require.NoError(t, os.Symlink("ok.txt", filepath.Join(s.Path, "inside")))
		require.NoError(t, syscall.Mkfifo(filepath.Join(s.Path, "newfifo"), 0o644))
		l, err := net.Listen("unix", filepath.Join(s.Path, "sock"))
		require.NoError(t, err)
		defer l.Close()
		write(t, s.Path, map[string]string{"locked-up": "x"})
		require.NoError(t, os.Chmod(filepath.Join(s.Path, "locked-up"), 0))
		v, err := e.m.Validate(e.ctx, s.ID, "")
		require.NoError(t, err)
		assert.Equal(t, []string{"unsafe abs", "unsafe climb", "unsafe locked-up", "unsafe newfifo", "unsafe sock"}, violated(v))
		_, err = e.m.Promote(e.ctx, s.ID, "")
		assert.ErrorIs(t, err, ErrNotValidated)

		out, err := e.m.Discard(e.ctx, s.ID, "", true)
		require.NoError(t, err)
		assert.Len(t, out.Reverted, 5)
		v, err = e.m.Validate(e.ctx, s.ID, "")
		require.NoError(t, err)
		assert.True(t, v.Passed, "the link inside the tree is fine: %v", violated(v))
	})
	t.Run("a write through a link in the real tree is refused", func(t *testing.T) {
		// The agent replaces the link "out" by a directory: promoting
		// out/secret must not write into the linked directory.
		require.NoError(t, os.Remove(filepath.Join(s.Path, "out")))
		write(t, s.Path, map[string]string{"out/secret": "overwritten"})
		v, err := e.m.Validate(e.ctx, s.ID, "")
		require.NoError(t, err)
		require.True(t, v.Passed)
		_, err = e.m.Promote(e.ctx, s.ID, "")
		assert.ErrorIs(t, err, ErrUnsafePath)
		assert.Equal(t, outsideBefore, tree(t, outside))
		assert.Equal(t, realBefore, tree(t, e.dir))
	})
	t.Run("ids and paths that are not shadows", func(t *testing.T) {
		for _, ref := range []string{"../x", "..", "/etc", filepath.Join(e.root, "..", "real"), "0123"} {
			_, err := e.m.Diff(e.ctx, ref)
			assert.ErrorIs(t, err, workspace.ErrNotFound, ref)
		}
	})
	assert.Equal(t, outsideBefore, tree(t, outside))
}

// ValidateDiff checks the diff it is given without scanning again, but
// only a diff whose hash is its changes', of this shadow; and a diff the
// tree has since moved from vouches for nothing at promotion.
func TestValidateDiffIsBoundToTheTree(t *testing.T) {
	e := newEnv(t, Options{})
	write(t, e.dir, map[string]string{"a.txt": "a", "b.txt": "b"})
	s := e.open(t, "alice", "")
	other := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"a.txt": "A"})
	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, d.Changes, 1)

	forged := d
	forged.Changes = nil // the real diff's hash, fewer changes
	_, err = e.m.ValidateDiff(e.ctx, s.ID, "", forged)
	require.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = e.m.ValidateDiff(e.ctx, other.ID, "", d)
	require.ErrorIs(t, err, workspace.ErrInvalid)

	v, err := e.m.ValidateDiff(e.ctx, s.ID, "", d)
	require.NoError(t, err)
	require.True(t, v.Passed)
	require.Equal(t, d.Hash, v.DiffHash)

	// The tree moves after the diff: the validation no longer holds.
	write(t, s.Path, map[string]string{"b.txt": "B"})
	_, err = e.m.Promote(e.ctx, s.ID, "")
	require.ErrorIs(t, err, ErrNotValidated)
	require.Equal(t, "a", tree(t, e.dir)["a.txt"][len("644:"):])

	// Validated again with the tree as it is, it promotes.
	d, err = e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	_, err = e.m.ValidateDiff(e.ctx, s.ID, "", d)
	require.NoError(t, err)
	p, err := e.m.Promote(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.Len(t, p.Diff.Changes, 2)
}

// With validator commands configured, ValidateDiff scans after they ran
// (a formatter may change files): the validation is of the tree then.
func TestValidateDiffScansAgainAfterCommands(t *testing.T) {
	e := newEnv(t, Options{Validators: []string{"printf fmt > a.txt"}})
	write(t, e.dir, map[string]string{"a.txt": "a"})
	s := e.open(t, "alice", "")
	write(t, s.Path, map[string]string{"a.txt": "A"})
	d, err := e.m.Diff(e.ctx, s.ID)
	require.NoError(t, err)
	v, err := e.m.ValidateDiff(e.ctx, s.ID, "", d)
	require.NoError(t, err)
	require.True(t, v.Passed)
	require.NotEqual(t, d.Hash, v.DiffHash, "the command changed a.txt after the diff")
	p, err := e.m.Promote(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, "fmt", tree(t, e.dir)["a.txt"][len("644:"):])
	require.Len(t, p.Diff.Changes, 1)
}
