package server_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestTheLastPossibleSeqIsNotCompacted asks for the history and the
// stream after the largest seq there is: an empty page and an open
// stream, not a 410 from an overflow.
func TestTheLastPossibleSeqIsNotCompacted(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{Heartbeat: 20 * time.Millisecond})
	putNotes(t, e.ws, 0, 3)
	require.NoError(t, e.ws.Events().Compact(context.Background(), 2))
	max := strconv.FormatInt(math.MaxInt64, 10)
	var page workspace.EventPage
	e.ok(200, &page, "GET", "/v1/events/history?after="+max, nil)
	assert.Empty(t, page.Events)
	ch, cancel := stream(t, e.hs.URL, "?after="+max, -1)
	defer cancel()
	r, ok := next(t, ch)
	require.True(t, ok)
	assert.Empty(t, r.Data)
	ch2, cancel2 := stream(t, e.hs.URL, "", math.MaxInt64)
	defer cancel2()
	_, ok = next(t, ch2)
	require.True(t, ok)
}
