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
// stream after the largest seq there is: an empty page, not a 410
// compacted from an overflow. A stream resumed there is past anything
// the log holds, so it ends with rewound (the log is not the one its
// client followed), not compacted.
func TestTheLastPossibleSeqIsNotCompacted(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{Heartbeat: 20 * time.Millisecond})
	putNotes(t, e.ws, 0, 3)
	require.NoError(t, e.ws.Events().Compact(context.Background(), 2))
	max := strconv.FormatInt(math.MaxInt64, 10)
	var page workspace.EventPage
	e.ok(200, &page, "GET", "/v1/events/history?after="+max, nil)
	assert.Empty(t, page.Events)
	for _, open := range []func() (<-chan sseRecord, func()){
		func() (<-chan sseRecord, func()) { return stream(t, e.hs.URL, "?after="+max, -1) },
		func() (<-chan sseRecord, func()) { return stream(t, e.hs.URL, "", math.MaxInt64) },
	} {
		ch, cancel := open()
		r, ok := next(t, ch)
		require.True(t, ok)
		assert.Contains(t, r.Data, `"code":"rewound"`)
		assert.NotContains(t, r.Data, "compacted")
		cancel()
	}
}
