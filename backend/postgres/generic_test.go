package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
)

// In a predicted group, generic plans stay forced for the writes of a row
// by its key and the append of events, and any other statement is
// preceded by genericBack: what it is planned by does not change.
func TestGenericPlansStayOnlyForKeyedWrites(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(ctx, nil)
	p.generic = true
	_, _ = p.Exec(ctx, putArtifact)
	_, _ = p.Exec(ctx, appendEvents)
	assert.Equal(t, []string{putArtifact, appendEvents}, p.sqls)
	_, _ = p.Exec(ctx, pruneIdempotent)
	_, _ = p.Exec(ctx, putNote)
	assert.Equal(t, []string{putArtifact, appendEvents, genericBack, pruneIdempotent, putNote}, p.sqls)
	assert.False(t, p.generic)
}

// A text[] literal (textArray) reads back as the strings it was made of,
// whatever they hold: quotes, backslashes, braces, commas, spaces, the
// word NULL, nothing at all, and characters of several bytes.
func TestTextArraysReadBackAsTheirStrings(t *testing.T) {
	conn := pgtest.Connect(t)
	for _, ss := range [][]string{
		{},
		{""},
		{"a", "b"},
		{`say "hi"`, `back\slash`, `\"`, `"`, `\`},
		{"{x,y}", "a,b", " lead", "trail ", "NULL", "null"},
		{"日本語", "é", "tab\there", "new\nline"},
	} {
		var got []string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT $1::text[]`, textArray(ss)).Scan(&got))
		assert.Equal(t, ss, got)
	}
}
