package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
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
