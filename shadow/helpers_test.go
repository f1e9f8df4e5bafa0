package shadow

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/workspace"
)

// The crash test re-executes this binary as a child that promotes a
// shadow and kills itself with SIGKILL at one step of the promotion.
const (
	childEnv   = "AGENTSPACE_SHADOW_TEST_CHILD" // "ROOT|DSN|SHADOW|KILLAT"
	childSteps = "AGENTSPACE_SHADOW_TEST_STEPS"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(spec string) error {
	var root, dsn, id, killAt string
	if _, err := fmt.Sscanf(spec, "%s %s %s %s", &root, &dsn, &id, &killAt); err != nil {
		return err
	}
	k, err := strconv.Atoi(killAt)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ws.Close()
	m, err := New(ws, Options{Root: root})
	if err != nil {
		return err
	}
	n := 0
	crashPoint = func() {
		n++
		if n == k {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	_, err = m.Promote(ctx, id, "")
	if f := os.Getenv(childSteps); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(n)), 0o600)
	}
	return err
}

// env is one test's workspace, shadow root and real directory.
type env struct {
	ctx  context.Context
	dsn  string
	ws   *workspace.Workspace
	m    *Manager
	root string
	dir  string
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), opts)
}

// tempIn makes a directory under parent, removed after the test.
func tempIn(t testing.TB, parent string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "shadow-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// newEnvIn is newEnv in base, an empty directory.
func newEnvIn(t testing.TB, base string, opts Options) *env {
	t.Helper()
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := "json:" + filepath.Join(base, "ws") // the cheapest store to open: tests open many
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	opts.Root = filepath.Join(base, "shadows")
	m, err := New(ws, opts)
	require.NoError(t, err)
	dir := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(dir, 0o755))
	return &env{ctx: ctx, dsn: dsn, ws: ws, m: m, root: opts.Root, dir: dir}
}

// another returns an env on the same workspace with its own real
// directory and shadow root: cheaper than a new store.
func (e *env) another(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	m, err := New(e.ws, Options{Root: filepath.Join(base, "shadows")})
	require.NoError(t, err)
	dir := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(dir, 0o755))
	return &env{ctx: e.ctx, dsn: e.dsn, ws: e.ws, m: m, root: m.opts.Root, dir: dir}
}

// write puts files (path -> content) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// tree reads every file and link under dir: path -> mode and content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "link:" + l
			return err
		}
		if !d.Type().IsRegular() {
			out[filepath.ToSlash(rel)] = "special:" + d.Type().String()
			return nil
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%o:%s", info.Mode(), b)
		return err
	})
	require.NoError(t, err)
	return out
}

// open opens a shadow of e.dir.
func (e *env) open(t *testing.T, actor, task string) Shadow {
	t.Helper()
	s, err := e.m.Open(e.ctx, OpenRequest{Dir: e.dir, Actor: actor, Task: task})
	require.NoError(t, err)
	return s
}

// validPromote validates then promotes, requiring both to pass.
func (e *env) validPromote(t *testing.T, s Shadow) Promotion {
	t.Helper()
	v, err := e.m.Validate(e.ctx, s.ID, "")
	require.NoError(t, err)
	require.True(t, v.Passed, "violations: %+v", v.Violations)
	p, err := e.m.Promote(e.ctx, s.ID, "")
	require.NoError(t, err)
	return p
}

// messages lists the event messages of the shadow notes, in order.
func messages(t *testing.T, ws *workspace.Workspace, kind string) []string {
	t.Helper()
	page, err := ws.Events().Read(context.Background(), workspace.EventQuery{Limit: 1000})
	require.NoError(t, err)
	var out []string
	for _, ev := range page.Events {
		if ev.Subject.Kind == workspace.SubjectNote && filepath.Dir(ev.Subject.ID) == kind {
			out = append(out, ev.Message)
		}
	}
	return out
}
