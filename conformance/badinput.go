package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// fixture is a small populated store the bad-input and closed-handle cases
// aim their calls at.
type fixture struct {
	artifact workspace.Artifact
	task     workspace.Task
	lease    workspace.Lease
}

func populate(t testing.TB, ws *workspace.Workspace) fixture {
	t.Helper()
	ctx := testCtx(t)
	var fx fixture
	var err error
	fx.artifact, err = ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "docs/a.md", Kind: "plan", Content: []byte("a")})
	require.NoError(t, err)
	fx.task, err = ws.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "decision", Key: "k"})
	require.NoError(t, err)
	fx.lease = acquire(t, ws, "file:x", "alice", time.Hour)
	return fx
}

type badCall struct {
	name    string
	call    func(ctx context.Context, ws *workspace.Workspace, fx fixture) error
	wantErr error
}

// Helpers that make one bad call each, keeping the table one line per input.
func createNamed(name string) func(context.Context, *workspace.Workspace, fixture) error {
	return createArt(as("bob"), workspace.NewArtifact{Name: name})
}

func createArt(w workspace.Write, a workspace.NewArtifact) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Artifacts().Create(ctx, w, a)
		return err
	}
}

func updateArt(w workspace.Write, ref func(fixture) workspace.ArtifactRef, c workspace.ArtifactChange) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
		_, err := ws.Artifacts().Update(ctx, w, ref(fx), c)
		return err
	}
}

func byFixtureID(fx fixture) workspace.ArtifactRef { return workspace.ByID(fx.artifact.ID) }

func putNote(w workspace.Write, n workspace.NotePut) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Notes().Put(ctx, w, n)
		return err
	}
}

func createTask(w workspace.Write, nt workspace.NewTask) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Tasks().Create(ctx, w, nt)
		return err
	}
}

func updateTask(w workspace.Write, c workspace.TaskChange) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
		_, err := ws.Tasks().Update(ctx, w, fx.task.ID, c)
		return err
	}
}

func acquireReq(r workspace.AcquireRequest) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Locks().Acquire(ctx, r)
		return err
	}
}

func claimReq(r workspace.ClaimRequest) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Tasks().Claim(ctx, r)
		return err
	}
}

func readQ(q workspace.EventQuery) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Events().Read(ctx, q)
		return err
	}
}

func commitOps(actor string, ops ...workspace.Op) func(context.Context, *workspace.Workspace, fixture) error {
	return func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
		_, err := ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: ops})
		return err
	}
}

// badInputs is DESIGN.md's "Bad input" list across every call. The store's
// size limit is 1024 bytes (ws_max_artifact_size).
func badInputs() []badCall {
	inv, big := workspace.ErrInvalid, workspace.ErrTooLarge
	long := func(n int) string { return strings.Repeat("a", n) }
	ok := workspace.NewArtifact{Name: "ok"}
	name := func(n string) workspace.NewArtifact { return workspace.NewArtifact{Name: n} }
	var tooMany []workspace.Op
	for range workspace.MaxOpsPerBatch + 1 {
		tooMany = append(tooMany, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}})
	}
	return []badCall{
		// Actors.
		{"empty actor", createArt(as(""), ok), inv},
		{"over-long actor", createArt(as(long(workspace.MaxActorLen+1)), ok), inv},
		{"actor with a newline", createArt(as("al\nice"), ok), inv},
		{"actor with NUL", createArt(as("al\x00ice"), ok), inv},
		{"actor of invalid UTF-8", createArt(as("al\xffice"), ok), inv},
		// Artifact names.
		{"empty name", createNamed(""), inv},
		{"absolute name", createNamed("/etc/passwd"), inv},
		{"dot-dot segment", createNamed("a/../../etc/passwd"), inv},
		{"leading dot-dot", createNamed("../x"), inv},
		{"dot segment", createNamed("a/./b"), inv},
		{"empty segment", createNamed("a//b"), inv},
		{"trailing slash", createNamed("a/"), inv},
		{"backslash", createNamed(`a\b`), inv},
		{"windows path", createNamed(`..\..\x`), inv},
		{"drive letter", createNamed("C:x"), inv},
		{"NUL in name", createNamed("a\x00b"), inv},
		{"control character in name", createNamed("a\x01b"), inv},
		{"newline in name", createNamed("a\nb"), inv},
		{"DEL in name", createNamed("a\x7fb"), inv},
		{"invalid UTF-8 name", createNamed("a\xff\xfe"), inv},
		{"over-long name", createNamed(long(workspace.MaxNameLen + 1)), inv},
		// Other artifact fields.
		{"upper-case kind", createArt(as("bob"), workspace.NewArtifact{Name: "k", Kind: "Plan"}), inv},
		{"kind with a space", createArt(as("bob"), workspace.NewArtifact{Name: "k", Kind: "my plan"}), inv},
		{"kind starting with a digit", createArt(as("bob"), workspace.NewArtifact{Name: "k", Kind: "1plan"}), inv},
		{"over-long kind", createArt(as("bob"), workspace.NewArtifact{Name: "k", Kind: long(workspace.MaxKindLen + 1)}), inv},
		{"content type with a newline", createArt(as("bob"), workspace.NewArtifact{Name: "k", ContentType: "text/plain\nX: y"}), inv},
		{"empty label key", createArt(as("bob"), workspace.NewArtifact{Name: "k", Labels: map[string]string{"": "v"}}), inv},
		{"task id not a UUID", createArt(as("bob"), workspace.NewArtifact{Name: "k", TaskID: "task-1"}), inv},
		{"oversized content", createArt(as("bob"), workspace.NewArtifact{Name: "k", Content: make([]byte, 1025)}), big},
		{"NUL in message", createArt(workspace.Write{Actor: "bob", Message: "a\x00b"}, name("k")), inv},
		{"over-long idempotency key", createArt(workspace.Write{Actor: "bob", IdempotencyKey: long(257)}, name("k")), inv},
		// Artifact refs and conditions.
		{"ref with ID and name", updateArt(as("bob"), func(fx fixture) workspace.ArtifactRef {
			return workspace.ArtifactRef{ID: fx.artifact.ID, Name: fx.artifact.Name}
		}, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"ref with a bad ID", updateArt(as("bob"), func(fixture) workspace.ArtifactRef { return workspace.ByID("not-a-uuid") }, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"ref with no ID or name", updateArt(as("bob"), func(fixture) workspace.ArtifactRef { return workspace.ArtifactRef{} }, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"update of an old version", updateArt(as("bob"), func(fx fixture) workspace.ArtifactRef {
			return workspace.ArtifactRef{ID: fx.artifact.ID, Version: 1}
		}, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"negative IfVersion", updateArt(workspace.Write{Actor: "bob", IfVersion: -1}, byFixtureID, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"negative fence", updateArt(workspace.Write{Actor: "bob", Fence: -1}, byFixtureID, workspace.ArtifactChange{Content: []byte("x")}), inv},
		{"update with a bad kind", updateArt(as("bob"), byFixtureID, workspace.ArtifactChange{Kind: ptr("BAD")}), inv},
		{"update with an empty owner", updateArt(as("bob"), byFixtureID, workspace.ArtifactChange{Owner: ptr("")}), inv},
		{"update with oversized content", updateArt(as("bob"), byFixtureID, workspace.ArtifactChange{Content: make([]byte, 2048)}), big},
		{"get with a negative version", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			_, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: fx.artifact.ID, Version: -1})
			return err
		}, inv},
		{"get by a name with ..", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Artifacts().Get(ctx, workspace.ByName("../docs/a.md"))
			return err
		}, inv},
		{"versions of an absolute name", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Artifacts().Versions(ctx, workspace.ByName("/docs/a.md"))
			return err
		}, inv},
		{"delete by a bad ID", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			return ws.Artifacts().Delete(ctx, as("bob"), workspace.ByID("1234"))
		}, inv},
		{"rollback to version 0", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			_, err := ws.Artifacts().Rollback(ctx, as("bob"), workspace.ByID(fx.artifact.ID), 0)
			return err
		}, inv},
		{"rollback to a negative version", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			_, err := ws.Artifacts().Rollback(ctx, as("bob"), workspace.ByID(fx.artifact.ID), -3)
			return err
		}, inv},
		{"list with a negative limit", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Limit: -1})
			return err
		}, inv},
		{"list with a bad kind", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Kind: "Bad Kind"})
			return err
		}, inv},
		// Tasks.
		{"empty task title", createTask(as("bob"), workspace.NewTask{}), inv},
		{"title with a newline", createTask(as("bob"), workspace.NewTask{Title: "a\nb"}), inv},
		{"parent id not a UUID", createTask(as("bob"), workspace.NewTask{Title: "t", ParentID: "parent"}), inv},
		{"dependency not a UUID", createTask(as("bob"), workspace.NewTask{Title: "t", DependsOn: []string{"dep"}}), inv},
		{"priority out of range", createTask(as("bob"), workspace.NewTask{Title: "t", Priority: 2_000_000}), inv},
		{"unknown status", updateTask(as("bob"), workspace.TaskChange{Status: ptr(workspace.TaskStatus("finished"))}), inv},
		{"upper-case status", updateTask(as("bob"), workspace.TaskChange{Status: ptr(workspace.TaskStatus("DONE"))}), inv},
		{"empty status", updateTask(as("bob"), workspace.TaskChange{Status: ptr(workspace.TaskStatus(""))}), inv},
		{"in_progress without Claim", updateTask(as("bob"), workspace.TaskChange{Status: ptr(workspace.TaskInProgress)}), inv},
		{"result naming a bad artifact", updateTask(as("bob"), workspace.TaskChange{Result: &workspace.TaskResult{Artifacts: []string{"/abs"}}}), inv},
		{"task update with a negative IfVersion", updateTask(workspace.Write{Actor: "bob", IfVersion: -2}, workspace.TaskChange{Title: ptr("x")}), inv},
		{"get a task by a bad id", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Tasks().Get(ctx, "42")
			return err
		}, inv},
		{"list tasks by a bad status", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Tasks().List(ctx, workspace.TaskFilter{Status: "open"})
			return err
		}, inv},
		{"claim without an actor", claimReq(workspace.ClaimRequest{}), inv},
		{"claim with a negative lease", claimReq(workspace.ClaimRequest{Actor: "bob", Lease: -time.Second}), inv},
		{"claim with a lease over the maximum", claimReq(workspace.ClaimRequest{Actor: "bob", Lease: workspace.MaxTTL + time.Second}), inv},
		{"claim with a bad parent", claimReq(workspace.ClaimRequest{Actor: "bob", ParentID: "p"}), inv},
		{"heartbeat with a lease over the maximum", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			_, err := ws.Tasks().Heartbeat(ctx, as("bob"), fx.task.ID, 8*24*time.Hour)
			return err
		}, inv},
		{"complete a bad id", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Tasks().Complete(ctx, as("bob"), "", workspace.TaskResult{})
			return err
		}, inv},
		// Notes.
		{"upper-case note kind", putNote(as("bob"), workspace.NotePut{Kind: "Decision", Key: "k"}), inv},
		{"empty note kind", putNote(as("bob"), workspace.NotePut{Key: "k"}), inv},
		{"empty note key", putNote(as("bob"), workspace.NotePut{Kind: "decision"}), inv},
		{"note key with a control character", putNote(as("bob"), workspace.NotePut{Kind: "decision", Key: "k\x1b[2J"}), inv},
		{"over-long note key", putNote(as("bob"), workspace.NotePut{Kind: "decision", Key: long(workspace.MaxKeyLen + 1)}), inv},
		{"over-long note body", putNote(as("bob"), workspace.NotePut{Kind: "decision", Key: "k", Body: long(workspace.MaxTextLen + 1)}), inv},
		{"note body of invalid UTF-8", putNote(as("bob"), workspace.NotePut{Kind: "decision", Key: "k", Body: "\xc3\x28"}), inv},
		{"get a note of a bad kind", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Notes().Get(ctx, "no kind", "k")
			return err
		}, inv},
		{"delete a note with an empty key", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			return ws.Notes().Delete(ctx, as("bob"), "decision", "")
		}, inv},
		{"list notes from a bad cursor", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			_, err := ws.Notes().List(ctx, workspace.NoteFilter{After: "no-slash"})
			return err
		}, inv},
		// Locks.
		{"zero TTL", acquireReq(workspace.AcquireRequest{Resource: "r", Owner: "bob"}), inv},
		{"negative TTL", acquireReq(workspace.AcquireRequest{Resource: "r", Owner: "bob", TTL: -time.Minute}), inv},
		{"TTL over the maximum", acquireReq(workspace.AcquireRequest{Resource: "r", Owner: "bob", TTL: workspace.MaxTTL + time.Hour}), inv},
		{"empty resource", acquireReq(workspace.AcquireRequest{Owner: "bob", TTL: time.Minute}), inv},
		{"resource with NUL", acquireReq(workspace.AcquireRequest{Resource: "r\x00", Owner: "bob", TTL: time.Minute}), inv},
		{"empty owner", acquireReq(workspace.AcquireRequest{Resource: "r", TTL: time.Minute}), inv},
		{"renew with token 0", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			l := fx.lease
			l.Token = 0
			_, err := ws.Locks().Renew(ctx, l, time.Minute)
			return err
		}, inv},
		{"renew with a TTL over the maximum", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			_, err := ws.Locks().Renew(ctx, fx.lease, workspace.MaxTTL*2)
			return err
		}, inv},
		{"release with a negative token", func(ctx context.Context, ws *workspace.Workspace, fx fixture) error {
			l := fx.lease
			l.Token = -1
			return ws.Locks().Release(ctx, l)
		}, inv},
		{"force release without an actor", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			return ws.Locks().ForceRelease(ctx, as(""), "file:x")
		}, inv},
		// Events.
		{"read after a negative seq", readQ(workspace.EventQuery{AfterSeq: -1}), inv},
		{"read with until before since", readQ(workspace.EventQuery{Since: time.Now(), Until: time.Now().Add(-time.Hour)}), inv},
		{"read with a negative limit", readQ(workspace.EventQuery{Limit: -5}), inv},
		{"read with an empty type", readQ(workspace.EventQuery{Types: []string{""}}), inv},
		{"subscribe after a negative seq", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			s, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: -1}})
			if err == nil {
				_ = s.Close()
			}
			return err
		}, inv},
		{"compact to floor 0", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			return ws.Events().Compact(ctx, 0)
		}, inv},
		{"compact past the head", func(ctx context.Context, ws *workspace.Workspace, _ fixture) error {
			return ws.Events().Compact(ctx, 1000)
		}, inv},
		// Batches.
		{"empty batch", commitOps("bob"), inv},
		{"batch without an actor", commitOps("", workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "x"}}), inv},
		{"nil op", commitOps("bob", workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "x"}}, nil), inv},
		{"nil op pointer", commitOps("bob", (*workspace.PutNoteOp)(nil)), inv},
		{"too many ops", commitOps("bob", tooMany...), inv},
		{"bad op after good ones", commitOps("bob",
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "x"}},
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "a/../b"}}), inv},
		{"release op with token 0", commitOps("alice", workspace.ReleaseLockOp{Resource: "file:x"}), inv},
		{"oversized op", commitOps("bob",
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "big", Content: make([]byte, 1025)}}), big},
	}
}

// testBadInput: every bad input gets ErrInvalid (or ErrTooLarge) naming the
// field, and the store is left exactly as it was.
func testBadInput(t *testing.T, h Harness) {
	dsn := dsnWith(h.NewDSN(t), "ws_max_artifact_size", "1024")
	ws := open(t, dsn)
	fx := populate(t, ws)
	cases := badInputs()
	require.GreaterOrEqual(t, len(cases), 30)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snap(t, ws)
			err := c.call(testCtx(t), ws, fx)
			require.ErrorIs(t, err, c.wantErr)
			var ie *workspace.InvalidError
			if assert.True(t, errors.As(err, &ie), "bad input is an *InvalidError: %v", err) {
				assert.NotEmpty(t, ie.Field, "the error names the field")
				assert.NotEmpty(t, ie.Reason, "the error says why")
			}
			if c.wantErr == workspace.ErrTooLarge {
				assert.NotErrorIs(t, err, workspace.ErrInvalid)
			}
			assert.Equal(t, before, snap(t, ws), "nothing is written")
		})
	}
	got, err := ws.Artifacts().Get(testCtx(t), workspace.ByID(fx.artifact.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Version)
}

// testBadDSN: an unknown ws_ parameter or a bad value is an error at Open,
// not silently ignored.
func testBadDSN(t *testing.T, h Harness) {
	base := h.NewDSN(t)
	for _, c := range []struct{ key, value string }{
		{"ws_no_such_param", "1"},
		{"ws_max_artifact_size", "0"},
		{"ws_max_artifact_size", "lots"},
		{"ws_poll", "forever"},
		{"ws_idempotency_ttl", "1ms"},
		{"ws_automigrate", "maybe"},
		{"ws_group_wait", "1s"},
		{"ws_group_wait", "-1ms"},
	} {
		ws, err := workspace.Open(testCtx(t), dsnWith(base, c.key, c.value))
		if ws != nil {
			_ = ws.Close()
		}
		assert.ErrorIs(t, err, workspace.ErrInvalid, "%s=%s", c.key, c.value)
	}
	ws, err := workspace.Open(testCtx(t), "nosuchscheme:"+t.TempDir())
	if ws != nil {
		_ = ws.Close()
	}
	assert.ErrorIs(t, err, workspace.ErrInvalid, "an unknown scheme")
	assert.Equal(t, int64(0), headOf(t, open(t, base)), "the refused opens wrote nothing")
}

// testClosedHandle: every call on a closed handle is ErrClosed; other
// handles on the store carry on, and open subscriptions end with ErrClosed.
func testClosedHandle(t *testing.T, h Harness) {
	dsn, other := fresh(t, h)
	fx := populate(t, other)
	ws, err := workspace.Open(testCtx(t), dsn)
	require.NoError(t, err)
	sub, err := ws.Events().Subscribe(testCtx(t), workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.NoError(t, ws.Close(), "closing twice is harmless")

	for range sub.C() { // drain what was delivered before the close
	}
	assert.ErrorIs(t, sub.Err(), workspace.ErrClosed, "a subscription of a closed handle ends with ErrClosed")
	_ = sub.Close()

	ctx := testCtx(t)
	ref := workspace.ByID(fx.artifact.ID)
	calls := map[string]func() error{
		"artifacts.create": func() error {
			_, err := ws.Artifacts().Create(ctx, as("a"), workspace.NewArtifact{Name: "n"})
			return err
		},
		"artifacts.get": func() error { _, err := ws.Artifacts().Get(ctx, ref); return err },
		"artifacts.update": func() error {
			_, err := ws.Artifacts().Update(ctx, as("a"), ref, workspace.ArtifactChange{Content: []byte("x")})
			return err
		},
		"artifacts.delete":   func() error { return ws.Artifacts().Delete(ctx, as("a"), ref) },
		"artifacts.rollback": func() error { _, err := ws.Artifacts().Rollback(ctx, as("a"), ref, 1); return err },
		"artifacts.versions": func() error { _, err := ws.Artifacts().Versions(ctx, ref); return err },
		"artifacts.list":     func() error { _, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{}); return err },
		"tasks.create": func() error {
			_, err := ws.Tasks().Create(ctx, as("a"), workspace.NewTask{Title: "t"})
			return err
		},
		"tasks.get": func() error { _, err := ws.Tasks().Get(ctx, fx.task.ID); return err },
		"tasks.update": func() error {
			_, err := ws.Tasks().Update(ctx, as("a"), fx.task.ID, workspace.TaskChange{Title: ptr("x")})
			return err
		},
		"tasks.claim": func() error { _, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "a"}); return err },
		"tasks.claim wait": func() error {
			_, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "a", Wait: true})
			return err
		},
		"tasks.heartbeat": func() error { _, err := ws.Tasks().Heartbeat(ctx, as("a"), fx.task.ID, time.Minute); return err },
		"tasks.complete": func() error {
			_, err := ws.Tasks().Complete(ctx, as("a"), fx.task.ID, workspace.TaskResult{})
			return err
		},
		"tasks.fail":    func() error { _, err := ws.Tasks().Fail(ctx, as("a"), fx.task.ID, workspace.TaskResult{}); return err },
		"tasks.release": func() error { _, err := ws.Tasks().Release(ctx, as("a"), fx.task.ID); return err },
		"tasks.list":    func() error { _, err := ws.Tasks().List(ctx, workspace.TaskFilter{}); return err },
		"notes.put": func() error {
			_, err := ws.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "decision", Key: "k"})
			return err
		},
		"notes.get":    func() error { _, err := ws.Notes().Get(ctx, "decision", "k"); return err },
		"notes.delete": func() error { return ws.Notes().Delete(ctx, as("a"), "decision", "k") },
		"notes.list":   func() error { _, err := ws.Notes().List(ctx, workspace.NoteFilter{}); return err },
		"locks.acquire": func() error {
			_, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "r", Owner: "a", TTL: time.Minute})
			return err
		},
		"locks.acquire wait": func() error {
			_, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:x", Owner: "a", TTL: time.Minute, Wait: true})
			return err
		},
		"locks.renew":         func() error { _, err := ws.Locks().Renew(ctx, fx.lease, time.Minute); return err },
		"locks.release":       func() error { return ws.Locks().Release(ctx, fx.lease) },
		"locks.force_release": func() error { return ws.Locks().ForceRelease(ctx, as("a"), "file:x") },
		"locks.get":           func() error { _, err := ws.Locks().Get(ctx, "file:x"); return err },
		"locks.list":          func() error { _, err := ws.Locks().List(ctx); return err },
		"events.read":         func() error { _, err := ws.Events().Read(ctx, workspace.EventQuery{}); return err },
		"events.head":         func() error { _, err := ws.Events().Head(ctx); return err },
		"events.compact":      func() error { return ws.Events().Compact(ctx, 1) },
		"events.subscribe": func() error {
			s, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{})
			if err == nil {
				_ = s.Close()
			}
			return err
		},
		"commit": func() error {
			_, err := ws.Commit(ctx, workspace.Batch{Actor: "a", Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}}}})
			return err
		},
		"status": func() error { _, err := ws.Status(ctx); return err },
	}
	before := snap(t, other)
	for name, call := range calls {
		assert.ErrorIs(t, call(), workspace.ErrClosed, name)
	}
	assert.Equal(t, before, snap(t, other), "calls on a closed handle write nothing")
	_, err = other.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "decision", Key: "still-open"})
	assert.NoError(t, err, "closing one handle leaves the others working")
}

// testStatus: the dashboard counts what is there and shows what is going on.
func testStatus(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	st, err := ws1.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), st.Head)
	assert.Equal(t, 0, st.Artifacts)
	assert.Empty(t, st.RecentEvents)

	populate(t, ws1)
	_, err = ws1.Artifacts().Create(ctx, as("a"), workspace.NewArtifact{Name: "gone"})
	require.NoError(t, err)
	require.NoError(t, ws1.Artifacts().Delete(ctx, as("a"), workspace.ByName("gone")))
	_, err = ws1.Tasks().Create(ctx, as("a"), workspace.NewTask{Title: "second"})
	require.NoError(t, err)
	claimed, err := ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w"})
	require.NoError(t, err)
	for i := range 25 {
		_, err := ws1.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "glossary", Key: string(rune('a' + i))})
		require.NoError(t, err)
	}

	st, err = ws2.Status(ctx)
	require.NoError(t, err)
	head := headOf(t, ws1)
	assert.Equal(t, head, st.Head)
	assert.Equal(t, int64(1), st.Floor)
	assert.Equal(t, 1, st.Artifacts, "deleted artifacts are not counted")
	assert.Equal(t, 26, st.Notes)
	assert.Equal(t, 1, st.Tasks[workspace.TaskPending])
	assert.Equal(t, 1, st.Tasks[workspace.TaskInProgress])
	require.Len(t, st.ActiveTasks, 1)
	assert.Equal(t, claimed.ID, st.ActiveTasks[0].ID)
	require.Len(t, st.Locks, 1)
	assert.Equal(t, "file:x", st.Locks[0].Resource)
	require.NotEmpty(t, st.RecentEvents)
	assert.Equal(t, head, st.RecentEvents[len(st.RecentEvents)-1].Seq, "recent events end with the newest")
}
