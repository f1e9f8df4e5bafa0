package jsonstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := openStore(context.Background(), driver.Config{Scheme: "json", Target: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestTwoHandlesInOneProcessExcludeEachOther(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	a, b := openTestStore(t, dir), openTestStore(t, dir)
	require.NoError(t, flock(a.lockf, true))
	err := syscall.Flock(int(b.lockf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	assert.True(t, errors.Is(err, syscall.EWOULDBLOCK), "a second handle's shared lock must wait for the first's exclusive one: %v", err)
	require.NoError(t, funlock(a.lockf))
	require.NoError(t, syscall.Flock(int(b.lockf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB))
	err = syscall.Flock(int(a.lockf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	assert.True(t, errors.Is(err, syscall.EWOULDBLOCK), "a writer must wait for another handle's reader: %v", err)
	require.NoError(t, funlock(b.lockf))
}

func TestNamesEqualButForCaseCollideOnCaseInsensitiveFileSystems(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	s.foldCase = true // as probed on macOS or Windows volumes
	ws := engine.New(s, workspace.Options{})
	ctx := context.Background()
	w := workspace.Write{Actor: "a"}
	_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "Plans/Auth.md", Content: []byte("x")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/auth.md", Content: []byte("y")})
	assert.ErrorIs(t, err, workspace.ErrAlreadyExists)
	require.NoError(t, ws.Artifacts().Delete(ctx, w, workspace.ByName("Plans/Auth.md")))
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/auth.md", Content: []byte("y")})
	assert.NoError(t, err, "the name is free once the other is deleted")
}

func TestReplayOfAnAppliedRecordChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	ws := engine.New(s, workspace.Options{})
	ctx := context.Background()
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "a.md", Content: []byte("x")})
	require.NoError(t, err)
	// Commit a second write, then put its record back as if the writer
	// died before emptying the journal.
	var rec *record
	err = s.Update(ctx, func(wtx driver.Tx) error {
		tx := wtx.(*tx)
		n := workspace.Note{Kind: "decision", Key: "k", Version: 1, Author: "a", UpdatedBy: "a", CreatedAt: tx.Now(), UpdatedAt: tx.Now()}
		if err := tx.PutNote(ctx, n); err != nil {
			return err
		}
		if _, err := tx.AppendEvents(ctx, []workspace.Event{{Time: tx.Now(), Actor: "a", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "decision/k", Name: "k"}, Version: 1}}); err != nil {
			return err
		}
		var err error
		rec, err = tx.record()
		return err
	})
	require.NoError(t, err)
	require.NoError(t, s.writeJournal(rec))

	other := openTestStore(t, dir) // replays at open
	pending, err := other.journalPending()
	require.NoError(t, err)
	assert.False(t, pending)
	ws2 := engine.New(other, workspace.Options{})
	page, err := ws2.Events().Read(ctx, workspace.EventQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Events, 2, "events already in the log are not appended again")
	_, err = ws2.Notes().Get(ctx, "decision", "k")
	assert.NoError(t, err)
}

// commitNote commits one note write through s and returns its record.
func commitNote(t *testing.T, s *store, key string) *record {
	t.Helper()
	ctx := context.Background()
	var rec *record
	err := s.Update(ctx, func(wtx driver.Tx) error {
		tx := wtx.(*tx)
		n := workspace.Note{Kind: "decision", Key: key, Version: 1, Author: "a", UpdatedBy: "a", CreatedAt: tx.Now(), UpdatedAt: tx.Now()}
		if err := tx.PutNote(ctx, n); err != nil {
			return err
		}
		if _, err := tx.AppendEvents(ctx, []workspace.Event{{Time: tx.Now(), Actor: "a", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "decision/" + key, Name: key}, Version: 1}}); err != nil {
			return err
		}
		var err error
		rec, err = tx.record()
		return err
	})
	require.NoError(t, err)
	return rec
}

func TestTornJournalIsDroppedAndTornLogLineIsRepaired(t *testing.T) {
	ctx := context.Background()
	t.Run("torn journal", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ws")
		s := openTestStore(t, dir)
		rec := commitNote(t, s, "k1")
		rec.Events[0].Seq = 2
		rec.Writes[0].Path = "notes/decision/never.json"
		b, err := encodeJournal(rec)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, journalFile), b[:len(b)-5], 0o600))

		other := openTestStore(t, dir)
		ws := engine.New(other, workspace.Options{})
		head, err := ws.Events().Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), head, "an incomplete record is not applied")
		_, err = os.Stat(filepath.Join(dir, "notes", "decision", "never.json"))
		assert.ErrorIs(t, err, os.ErrNotExist)
		fi, err := os.Stat(filepath.Join(dir, journalFile))
		require.NoError(t, err)
		assert.Zero(t, fi.Size())
	})
	t.Run("torn log line under a complete record", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ws")
		s := openTestStore(t, dir)
		commitNote(t, s, "k1")
		rec := commitNote(t, s, "k2")
		// The second commit's writer "died" half-way through its log line.
		logPath := filepath.Join(dir, eventsFile)
		data, err := os.ReadFile(logPath)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(logPath, data[:len(data)-10], 0o600))
		require.NoError(t, s.writeJournal(rec))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "notes", "decision", tmpPrefix+"stray"), []byte("x"), 0o600))

		other := openTestStore(t, dir)
		ws := engine.New(other, workspace.Options{})
		page, err := ws.Events().Read(ctx, workspace.EventQuery{})
		require.NoError(t, err)
		require.Len(t, page.Events, 2)
		assert.Equal(t, "k2", page.Events[1].Subject.Name)
		after, err := os.ReadFile(logPath)
		require.NoError(t, err)
		assert.Equal(t, data, after, "the torn line was cut and the event appended once")
		_, err = os.Stat(filepath.Join(dir, "notes", "decision", tmpPrefix+"stray"))
		assert.ErrorIs(t, err, os.ErrNotExist, "temp files are swept")
	})
}

func TestImportedEventsKeepTheirSeqs(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	ev := func(seq int64) workspace.Event {
		return workspace.Event{Seq: seq, Time: time.Now().UTC().Truncate(time.Microsecond), Actor: "importer", Type: workspace.EventNotePut,
			Subject: workspace.Subject{Kind: "note", ID: "decision/k", Name: "k"}, Version: 1}
	}
	err := s.Update(ctx, func(tx driver.Tx) error {
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev(10), ev(11)})
		assert.Equal(t, int64(10), first)
		return err
	})
	require.NoError(t, err)
	err = s.Update(ctx, func(tx driver.Tx) error {
		_, err := tx.AppendEvents(ctx, []workspace.Event{ev(11)})
		return err
	})
	assert.Error(t, err, "an explicit seq at or below the head is refused")

	other := openTestStore(t, dir)
	err = other.Update(ctx, func(tx driver.Tx) error {
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev(0)})
		assert.Equal(t, int64(12), first, "numbering continues after the imported seqs")
		return err
	})
	require.NoError(t, err)
	err = s.View(ctx, func(tx driver.ReadTx) error {
		evs, err := tx.Events(ctx, workspace.EventQuery{})
		require.NoError(t, err)
		var seqs []int64
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		assert.Equal(t, []int64{10, 11, 12}, seqs)
		return nil
	})
	require.NoError(t, err)
}

// TestReplaySkipsAppendsALaterRewriteReplaces replays a journal whose first
// entry appends to a versions file and whose second rewrites that file
// whole, shorter than where the append starts (an import replacing a
// version): the append is left out, and the rewrite stands.
func TestReplaySkipsAppendsALaterRewriteReplaces(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	ws := engine.New(s, workspace.Options{})
	w := workspace.Write{Actor: "a"}
	a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "a.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	vpath := filepath.Join(dir, filepath.FromSlash(versionsPath(a.ID)))
	two, err := os.ReadFile(vpath)
	require.NoError(t, err)
	one, err := encodeVersions([]workspace.Artifact{a})
	require.NoError(t, err)
	head, err := encodeArtifact(&artRec{id: a.ID, name: a.Name, versions: []workspace.Artifact{a}})
	require.NoError(t, err)

	appendRec := &record{Appends: []fileAppend{{Path: versionsPath(a.ID), At: int64(len(two)), Data: []byte("{}\n")}}}
	rewriteRec := &record{Writes: []fileWrite{{Path: versionsPath(a.ID), Data: one}, {Path: artifactPath(a.ID), Data: head}}}
	require.NoError(t, s.checkpoint()) // the journal holds only the two entries
	require.NoError(t, s.writeJournal(appendRec))
	require.NoError(t, s.writeJournal(rewriteRec))
	require.NoError(t, os.WriteFile(vpath, one, 0o600)) // as the rewrite left it

	other := engine.New(openTestStore(t, dir), workspace.Options{}) // replays at open
	vs, err := other.Artifacts().Versions(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Len(t, vs, 1)
	after, err := os.ReadFile(vpath)
	require.NoError(t, err)
	assert.Equal(t, string(one), string(after))
}
