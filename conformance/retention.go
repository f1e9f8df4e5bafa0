package conformance

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// retentionCases are the cases of the tamper-evident log and of retention.
var retentionCases = []coreCase{
	{"EventChainVerifiesFromTheFloor", testChainVerifies},
	{"EventChainSurvivesExportAndImport", testChainArchive},
}

// verify runs workspace.Verify and requires it to read.
func verify(t testing.TB, ws workspace.Workspace) workspace.VerifyReport {
	t.Helper()
	r, err := workspace.Verify(testCtx(t), ws)
	require.NoError(t, err)
	return r
}

// chainOf recomputes the hash of the log's head from the events Read
// returns, by the documented encoding, chained from base.
func chainOf(t testing.TB, ws workspace.Workspace, base []byte, after int64) string {
	t.Helper()
	h := base
	for _, e := range eventsAfter(t, ws, after) {
		h = driver.ChainHash(h, e)
	}
	return hex.EncodeToString(h)
}

// testChainVerifies: every event a store writes (alone, in a group commit
// of concurrent writers, after compaction) links to the one before by the
// documented encoding, and Verify checks the whole chain and every
// artifact version's content; compaction keeps the chain verifiable from
// the floor, with the head's hash unchanged.
func testChainVerifies(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	r := verify(t, ws1)
	assert.True(t, r.OK(), "an empty log verifies: %v", r.Problems)
	assert.Equal(t, hex.EncodeToString(driver.ZeroChainHash), r.HeadHash)

	a, err := ws1.Artifacts().Create(ctx, workspace.Write{Actor: "planner", Message: "ünïcode ✓"}, workspace.NewArtifact{Name: "plans/p.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws2.Artifacts().Update(ctx, as("coder"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	_, err = ws1.Artifacts().Update(ctx, asAt("racer", 1), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v3")})
	require.ErrorIs(t, err, workspace.ErrConflict, "a conflict event is chained too")
	_, err = ws2.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "build"})
	require.NoError(t, err)
	// Concurrent writers on both handles: group commits append several
	// events in one transaction.
	var wg sync.WaitGroup
	for w := range 6 {
		ws := []workspace.Workspace{ws1, ws2}[w%2]
		wg.Go(func() {
			for i := range 8 {
				_, err := ws.Notes().Put(ctx, as(fmt.Sprintf("w%d", w)), workspace.NotePut{Kind: "log", Key: fmt.Sprintf("%d-%d", w, i), Title: "t"})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()

	head := headOf(t, ws1)
	r = verify(t, ws2)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(1), r.Floor)
	assert.Equal(t, head, r.Head)
	assert.Equal(t, head, r.Events, "every event's link is checked")
	assert.Equal(t, int64(2), r.Versions, "every artifact version's content is checked")
	assert.Equal(t, chainOf(t, ws1, driver.ZeroChainHash, 0), r.HeadHash, "the store chains by the documented encoding")

	floor := head / 2
	require.NoError(t, ws1.Events().Compact(ctx, floor))
	after := verify(t, ws2)
	require.True(t, after.OK(), "verify after compaction: %v", after.Problems)
	assert.Equal(t, floor, after.Floor)
	assert.Equal(t, head-floor+1, after.Events, "from the floor on")
	assert.Equal(t, r.HeadHash, after.HeadHash, "compaction keeps the chain: the head's hash is unchanged")

	writeNotes(t, ws2, "after", 3)
	require.NoError(t, ws1.Events().Compact(ctx, head+1), "compact every event written before")
	r = verify(t, ws1)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(3), r.Events)
	writeNotes(t, ws1, "more", 2)
	r = verify(t, ws2)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(5), r.Events)
}

// testChainArchive: an archive carries each event's hash and the chain's
// base at its floor; importing it gives a store whose chain is the same
// (head hash and all) and verifies.
func testChainArchive(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	writeNotes(t, ws, "a", 9)
	require.NoError(t, ws.Events().Compact(ctx, 4))
	src := verify(t, ws)
	require.True(t, src.OK(), "verify: %v", src.Problems)

	var archive bytes.Buffer
	_, err := workspace.Export(ctx, ws, &archive, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Contains(t, archive.String(), `"hash":"`+src.HeadHash+`"`, "the archive carries the chain")

	_, copyWS := fresh(t, h)
	_, err = workspace.Import(ctx, copyWS, bytes.NewReader(archive.Bytes()), workspace.ArchiveOptions{})
	require.NoError(t, err)
	dst := verify(t, copyWS)
	require.True(t, dst.OK(), "verify the copy: %v", dst.Problems)
	assert.Equal(t, src.HeadHash, dst.HeadHash)
	assert.Equal(t, src.Floor, dst.Floor)
	writeNotes(t, copyWS, "b", 2)
	r := verify(t, copyWS)
	assert.True(t, r.OK(), "the copy chains on: %v", r.Problems)

	// An archive whose event was edited is refused, and nothing is written.
	var tampered []byte
	for line := range bytes.Lines(archive.Bytes()) {
		if bytes.HasPrefix(line, []byte(`{"type":"event"`)) && bytes.Contains(line, []byte(`a-5"`)) {
			line = bytes.ReplaceAll(line, []byte(`a-5"`), []byte(`a-X"`))
		}
		tampered = append(tampered, line...)
	}
	require.NotEqual(t, archive.Bytes(), tampered, "the archive has an event of note a-5")
	_, empty := fresh(t, h)
	_, err = workspace.Import(ctx, empty, bytes.NewReader(tampered), workspace.ArchiveOptions{})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "hash")
	assert.Equal(t, int64(0), headOf(t, empty), "nothing is written")
}

// Tamper edits a store behind the library's back, as anyone with access to
// its files or its database could. Each func gets the DSN of a store no
// handle has open.
type Tamper struct {
	// EditMessage changes the message of event seq in place, its hash kept.
	EditMessage func(t testing.TB, dsn string, seq int64)
	// DeleteEvent removes event seq.
	DeleteEvent func(t testing.TB, dsn string, seq int64)
	// EditContent changes the stored bytes of artifact id's content.
	EditContent func(t testing.TB, dsn string, id string)
}

// RunTamper checks that Verify finds each edit tm makes and names the
// first seq it broke (or the artifact), on stores from h.
func RunTamper(t *testing.T, h Harness, tm Tamper) {
	// setup writes an artifact and notes up to seq 10, and closes.
	setup := func(t *testing.T) (string, string) {
		dsn := h.NewDSN(t)
		ws, err := workspace.Open(testCtx(t), dsn, workspace.Options{})
		require.NoError(t, err)
		a, err := ws.Artifacts().Create(testCtx(t), as("planner"), workspace.NewArtifact{Name: "plan.md", Content: []byte("the plan")})
		require.NoError(t, err)
		writeNotes(t, ws, "w", 9)
		r := verify(t, ws)
		require.True(t, r.OK(), "verify before tampering: %v", r.Problems)
		require.NoError(t, ws.Close())
		return dsn, a.ID
	}
	reopen := func(t *testing.T, dsn string) workspace.VerifyReport {
		ws, err := workspace.Open(testCtx(t), dsn, workspace.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return verify(t, ws)
	}
	t.Run("EditedEventIsNamed", func(t *testing.T) {
		dsn, _ := setup(t)
		tm.EditMessage(t, dsn, 4)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Equal(t, int64(4), r.BrokenSeq, "problems: %v", r.Problems)
	})
	t.Run("DeletedEventIsNamed", func(t *testing.T) {
		dsn, _ := setup(t)
		tm.DeleteEvent(t, dsn, 6)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Equal(t, int64(6), r.BrokenSeq, "problems: %v", r.Problems)
	})
	t.Run("EditedContentIsNamed", func(t *testing.T) {
		dsn, id := setup(t)
		tm.EditContent(t, dsn, id)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Zero(t, r.BrokenSeq, "the log is intact")
		require.Len(t, r.Problems, 1)
		assert.Contains(t, r.Problems[0], id)
	})
}
