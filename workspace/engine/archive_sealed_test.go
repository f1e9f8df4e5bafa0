package engine_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/workspace"
)

// sealedKey stands for the server's token records: a sealed kind, whose
// notes are credentials.
var sealedKey = reserve.Register(reserve.Entry{Kind: "archive-test-sealed", Owner: "the archive tests", Sealed: true, Credential: true})

// TestImportLeavesSealedRecordsOutUnlessAsked: an archive's notes of a
// sealed kind are restored only with WithSealed; without it they are
// counted as left out, the rest is restored and verifies.
func TestImportLeavesSealedRecordsOutUnlessAsked(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	_, err := src.Notes().Put(sealedKey.Grant(ctx), workspace.Write{Actor: "root"}, workspace.NotePut{Kind: "archive-test-sealed", Key: "k1", Body: `{"actor":"root","role":"admin"}`})
	require.NoError(t, err)
	archive := export(t, src)
	require.Contains(t, string(archive), `"kind":"archive-test-sealed"`)

	dst := openSQLite(t, "dst")
	st, err := dst.Import(ctx, bytes.NewReader(archive), workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.SkippedSealed)
	assert.Equal(t, int64(2), st.Notes, "the other notes")
	_, err = dst.Notes().Get(sealedKey.Grant(ctx), "archive-test-sealed", "k1")
	assert.ErrorIs(t, err, workspace.ErrNotFound, "the sealed record was left out")
	r, err := dst.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)

	with := openSQLite(t, "with")
	st, err = with.Import(ctx, bytes.NewReader(archive), workspace.ArchiveOptions{WithSealed: true})
	require.NoError(t, err)
	assert.Zero(t, st.SkippedSealed)
	assert.Equal(t, int64(3), st.Notes)
	assert.Equal(t, string(archive), string(export(t, with)), "asked for, everything is restored")
}

// TestImportCountsTheEventsNoHashChecked: an archive stripped of its
// hashes (marked version 2, or left at 3) still imports, and the report
// says that none of its events was checked against a chain.
func TestImportCountsTheEventsNoHashChecked(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	archive := string(export(t, src))
	stripped := regexp.MustCompile(`,"hash":"[0-9a-f]+"`).ReplaceAllString(archive, "")
	stripped = regexp.MustCompile(`,"floor_hash":"[0-9a-f]+"`).ReplaceAllString(stripped, "")
	require.NotEqual(t, archive, stripped)
	for name, a := range map[string]string{
		"version 2": strings.Replace(stripped, `"version":3}`, `"version":2}`, 1),
		"version 3": stripped,
	} {
		t.Run(name, func(t *testing.T) {
			st, err := openSQLite(t, "dst").Import(ctx, strings.NewReader(a), workspace.ArchiveOptions{})
			require.NoError(t, err)
			assert.Positive(t, st.Events)
			assert.Equal(t, st.Events, st.Unchained)
		})
	}
}
