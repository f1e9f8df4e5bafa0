package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestGCDeletesRowsAnInterruptedGCLeftBelowTheFloor: gc raises the floor
// first and deletes the rows below it after, outside the writers' lock.
// Rows left there (gc stopped in between, made here with plain SQL) are
// read by nothing, and the next gc deletes them.
func TestGCDeletesRowsAnInterruptedGCLeftBelowTheFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	for i := range 30 {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: fmt.Sprint(i)})
		require.NoError(t, err)
	}
	conn := pgtest.Connect(t)
	schema := pgtest.SchemaOf(t, dsn)
	events := pgx.Identifier{schema, "events"}.Sanitize()
	counters := pgx.Identifier{schema, "counters"}.Sanitize()
	rowsBelow := func(floor int64) int64 {
		var n int64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+events+" WHERE seq < $1", floor).Scan(&n))
		return n
	}
	_, err = conn.Exec(ctx, "UPDATE "+counters+" SET floor = 11, floor_hash = (SELECT hash FROM "+events+" WHERE seq = 10)")
	require.NoError(t, err)
	require.Equal(t, int64(10), rowsBelow(11), "the interrupted gc left its rows")

	_, err = ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: 5})
	var ce *workspace.CompactedError
	require.ErrorAs(t, err, &ce, "no read goes below the floor")
	assert.Equal(t, int64(11), ce.Floor)
	v, err := ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)

	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEvents: 10, Batch: 4})
	require.NoError(t, err)
	assert.Equal(t, int64(10), r.Events.Count, "11-20 go; 1-10 were gone already")
	assert.Equal(t, int64(21), r.FloorAfter)
	assert.Equal(t, 3, r.Batches, "10 rows in deletes of at most 4")
	assert.Zero(t, rowsBelow(21), "the rows below both floors are deleted")
	v, err = ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)
	assert.Equal(t, int64(11), v.Events)
}
