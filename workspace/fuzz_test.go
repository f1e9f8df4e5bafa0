package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentspace/agentspace/workspace/driver"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// Hostile input must never panic and never get past validation. Seeds live
// in testdata/fuzz and run with every go test; fuzz one target with e.g.
//
//	go test -run '^$' -fuzz '^FuzzValidateName$' -fuzztime 2m ./workspace

// FuzzValidateName: an accepted name never reaches outside the directory it
// is joined to: not absolute, no "." or ".." segment, no NUL, no backslash,
// valid UTF-8, and cleaning it changes nothing.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"plans/a.md", "../x", "a/../../b", "/etc/passwd", "a\x00b", `a\b`, "C:x",
		"a/./b", "\u202egnp.exe", "a\uff0fb", "\xff", "a//b", " a", "日本/計画.md", "..", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := workspace.ValidateName(name)
		if err != nil {
			if !errors.Is(err, workspace.ErrInvalid) {
				t.Fatalf("ValidateName(%q) = %v, not ErrInvalid", name, err)
			}
			return
		}
		switch {
		case name == "", len(name) > workspace.MaxNameLen:
			t.Fatalf("accepted %q: empty or over-long", name)
		case !utf8.ValidString(name), strings.ContainsAny(name, "\x00\\"):
			t.Fatalf("accepted %q: invalid UTF-8, NUL or backslash", name)
		case path.IsAbs(name), filepath.IsAbs(name), filepath.VolumeName(name) != "":
			t.Fatalf("accepted %q: absolute", name)
		case path.Clean(name) != name:
			t.Fatalf("accepted %q: cleans to %q", name, path.Clean(name))
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("accepted %q: segment %q", name, seg)
			}
		}
		if j := filepath.Join("/root/ws", name); !strings.HasPrefix(j, "/root/ws/") {
			t.Fatalf("accepted %q: joins to %q, outside the directory", name, j)
		}
	})
}

// FuzzParseDSN: parsing and redacting never panic, and neither a redacted
// DSN nor a parse error ever contains the password.
func FuzzParseDSN(f *testing.F) {
	for _, s := range [][2]string{
		{"postgres://u:%s@h:5432/db?sslmode=disable", "hunter2"},
		{"postgresql://u:%s@h/db?ws_schema=s&ws_listen_dsn=" + url.QueryEscape("postgres://l:pw2@h/db"), "s3cr3t"},
		{"postgres://u@h/db?password=%s", "p@ss"},
		{"host=h user=u password=%s dbname=db", "'quoted pw'"},
		{"postgres://u:%s@[::1/db", "bad:url"},
		{"sqlite:/tmp/x.db?ws_poll=10ms&_pragma=%s", "busy_timeout(5)"},
		{"json:%s", "./ws"},
		{"postgres://u:%s@h/db?ws_nope=1", "pw/with?odd#chars"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, format, password string) {
		dsn := strings.Replace(format, "%s", password, 1)
		p, err := driver.ParseDSN(dsn)
		red := workspace.RedactDSN(dsn)
		if err == nil {
			_ = workspace.RedactDSN(p.Config.DSN)
		}
		// Only a password that is really in the DSN, as a password, can
		// leak; short ones also match innocent text, so look at long ones.
		if len(password) < 6 || !strings.Contains(format, "%s") || !isPasswordSlot(format) ||
			strings.ContainsAny(password, "@/?#&= '\\%:[]") || strings.Contains(strings.Replace(format, "%s", "", 1), password) {
			return
		}
		if strings.Contains(red, password) {
			t.Fatalf("RedactDSN(%q) = %q keeps the password", dsn, red)
		}
		if err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("ParseDSN(%q) error %q contains the password", dsn, err)
		}
	})
}

// isPasswordSlot reports whether the %s in format is where a password goes:
// after "user:" in a URL's authority, or as a password= value.
func isPasswordSlot(format string) bool {
	before, _, _ := strings.Cut(format, "%s")
	if strings.HasSuffix(strings.ToLower(before), "password=") {
		return true
	}
	scheme, rest, ok := strings.Cut(before, "://")
	if !ok || strings.ContainsAny(scheme, "/?#@") {
		return false
	}
	return !strings.ContainsAny(rest, "/?#@[]") && strings.Count(rest, ":") == 1 && strings.HasSuffix(rest, ":")
}

// FuzzImport: any bytes given to Import on a fresh store give a result or an
// error, never a panic; a refused archive leaves the store empty.
func FuzzImport(f *testing.F) {
	ctx := context.Background()
	src, err := workspace.Open(ctx, "sqlite:"+filepath.Join(f.TempDir(), "src.db"))
	if err != nil {
		f.Fatal(err)
	}
	populateForFuzz(f, src)
	var buf bytes.Buffer
	if _, err := src.Export(ctx, &buf, workspace.ArchiveOptions{}); err != nil {
		f.Fatal(err)
	}
	_ = src.Close()
	f.Add(buf.Bytes())
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	f.Add(bytes.Join(lines[:len(lines)/2], nil))
	f.Add([]byte(`{"type":"header","format":"agentspace-archive","version":1}` + "\n" + `{"type":"end","counts":{}}` + "\n"))
	f.Add([]byte(`{"type":"header","format":"agentspace-archive","version":1}` + "\n" +
		`{"type":"artifact","id":"0190a8b2-0000-7000-8000-000000000001","name":"../../etc/passwd","version":1,"kind":"x","owner":"a","content_type":"t","sha256":"00","size":0,"created_at":"2026-01-01T00:00:00Z","created_by":"a","updated_at":"2026-01-01T00:00:00Z","updated_by":"a"}` + "\n"))
	f.Add([]byte("\x00\xff{"))
	// A refused import leaves the store empty, so the next input reuses it;
	// a store that took an import is replaced. Inputs run one at a time.
	dir := f.TempDir()
	var (
		ws     *workspace.Workspace
		stores int
	)
	f.Cleanup(func() {
		if ws != nil {
			_ = ws.Close()
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		if ws == nil {
			stores++
			var err error
			ws, err = workspace.Open(ctx, fmt.Sprintf("sqlite:%s/%d.db?ws_synchronous=OFF", dir, stores))
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := ws.Import(ctx, bytes.NewReader(data), workspace.ArchiveOptions{})
		if err == nil {
			_ = ws.Close()
			ws = nil
			return
		}
		if !errors.Is(err, workspace.ErrInvalid) && !errors.Is(err, workspace.ErrTooLarge) {
			t.Fatalf("Import error %v is neither ErrInvalid nor ErrTooLarge", err)
		}
		st, serr := ws.Status(ctx)
		if serr != nil {
			t.Fatal(serr)
		}
		if st.Head != 0 || st.Artifacts != 0 || st.Notes != 0 || len(st.Locks) != 0 || countTasks(st) != 0 {
			_ = ws.Close()
			ws = nil
			t.Fatalf("a refused import wrote something: %+v", st)
		}
	})
}

func countTasks(st workspace.Status) int {
	n := 0
	for _, c := range st.Tasks {
		n += c
	}
	return n
}

// populateForFuzz writes a little of everything, so the seed archive has
// every record type.
func populateForFuzz(tb testing.TB, ws *workspace.Workspace) {
	tb.Helper()
	ctx := context.Background()
	w := workspace.Write{Actor: "alice"}
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("one"), Labels: map[string]string{"k": "v"}})
	must(err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("two")})
	must(err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "tmp/x", Content: []byte{0, 1}})
	must(err)
	must(ws.Artifacts().Delete(ctx, w, workspace.ByName("tmp/x")))
	t1, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "one"})
	must(err)
	_, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "two", DependsOn: []string{t1.ID}})
	must(err)
	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "db", Body: "sqlite"})
	must(err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "alice", TTL: 3600e9})
	must(err)
}

// FuzzCommit: random ops through Commit on a sqlite store. Each batch puts
// a valid note first, then the fuzzed op: a batch refused as ErrInvalid or
// ErrTooLarge writes nothing at all (not even the valid note), and an
// accepted one only ever stores names that pass ValidateName.
func FuzzCommit(f *testing.F) {
	f.Add(uint8(0), "plans/a.md", "plan", []byte("x"), int64(0))
	f.Add(uint8(0), "../../etc/passwd", "plan", []byte("x"), int64(0))
	f.Add(uint8(0), "a\x00b", "Plan", []byte(strings.Repeat("x", 100)), int64(0))
	f.Add(uint8(1), "docs/a.md", "text/plain\n", []byte("y"), int64(1))
	f.Add(uint8(2), "docs/a.md", "", []byte(nil), int64(-1))
	f.Add(uint8(3), "docs/a.md", "", []byte(nil), int64(0))
	f.Add(uint8(4), "'; DROP TABLE tasks; --", "100%_\\", []byte("d"), int64(2_000_000))
	f.Add(uint8(5), "in_progress", "title\n", []byte(nil), int64(0))
	f.Add(uint8(6), "decision", "k\u202e", []byte("body"), int64(0))
	f.Add(uint8(7), "Decision", "", []byte(nil), int64(3))
	f.Add(uint8(8), "file:x", "msg", []byte(nil), int64(0))
	f.Add(uint8(9), "", "", []byte(nil), int64(0))
	f.Fuzz(func(t *testing.T, sel uint8, a, b string, content []byte, n int64) {
		ctx := context.Background()
		ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db")+"?ws_max_artifact_size=64&ws_synchronous=OFF")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ws.Close() }()
		art, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "alice"}, workspace.NewArtifact{Name: "docs/a.md", Content: []byte("a")})
		if err != nil {
			t.Fatal(err)
		}
		task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "alice"}, workspace.NewTask{Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		before, err := ws.Events().Head(ctx)
		if err != nil {
			t.Fatal(err)
		}

		op := fuzzOp(sel, a, b, content, n, art.ID, task.ID)
		first := workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "fuzz-first"}}
		res, err := ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{first, op}})
		if err == nil {
			for _, r := range res.Results {
				if r.Artifact != nil && workspace.ValidateName(r.Artifact.Name) != nil {
					t.Fatalf("stored an invalid name %q", r.Artifact.Name)
				}
			}
			return
		}
		if !errors.Is(err, workspace.ErrInvalid) && !errors.Is(err, workspace.ErrTooLarge) {
			return // not found, conflict, locked...: a refusal the engine tests cover
		}
		after, herr := ws.Events().Head(ctx)
		if herr != nil {
			t.Fatal(herr)
		}
		if after != before {
			t.Fatalf("a refused batch (%v) moved the head from %d to %d", err, before, after)
		}
		if _, gerr := ws.Notes().Get(ctx, "decision", "fuzz-first"); !errors.Is(gerr, workspace.ErrNotFound) {
			t.Fatalf("a refused batch (%v) kept its first op: %v", err, gerr)
		}
	})
}

// fuzzOp builds one op of the kind sel picks, its fields from the fuzzer.
func fuzzOp(sel uint8, a, b string, content []byte, n int64, artID, taskID string) workspace.Op {
	ref := workspace.ByName(a)
	if sel&0x80 != 0 {
		ref = workspace.ArtifactRef{ID: artID, Version: n}
	}
	labels := map[string]string{a: b}
	if sel&0x40 != 0 {
		labels = nil
	}
	cond := workspace.Cond{IfVersion: n, Message: b}
	switch sel % 10 {
	case 0:
		return workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: a, Kind: b, Content: content, Labels: labels}, Message: b}
	case 1:
		return workspace.UpdateArtifactOp{Ref: ref, Change: workspace.ArtifactChange{Content: content, ContentType: &b, Labels: labels}, Cond: cond}
	case 2:
		return workspace.DeleteArtifactOp{Ref: ref, Cond: cond}
	case 3:
		return workspace.RollbackArtifactOp{Ref: ref, To: n, Cond: cond}
	case 4:
		return workspace.CreateTaskOp{Task: workspace.NewTask{Title: a, Description: b, Priority: int(n), Labels: labels, DependsOn: []string{b}}}
	case 5:
		st := workspace.TaskStatus(a)
		return workspace.UpdateTaskOp{ID: taskID, Change: workspace.TaskChange{Status: &st, Title: &b,
			Result: &workspace.TaskResult{Summary: string(content), Artifacts: []string{b}}}, Cond: cond}
	case 6:
		return workspace.PutNoteOp{Note: workspace.NotePut{Kind: a, Key: b, Body: string(content)}, Cond: cond}
	case 7:
		return workspace.DeleteNoteOp{Kind: a, Key: b, Cond: cond}
	case 8:
		return workspace.ReleaseLockOp{Resource: a, Token: n, Message: b}
	}
	return nil
}
