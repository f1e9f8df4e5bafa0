package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/workspace"
)

func TestReadsTruncateTheTimeBoundsToMicroseconds(t *testing.T) {
	at := time.Date(2026, 11, 22, 8, 0, 0, 1500, time.UTC) // 1.5 µs
	q := workspace.EventQuery{Since: at, Until: at.Add(time.Second)}
	assert.NoError(t, checkQuery(&q, true))
	assert.Equal(t, at.Truncate(time.Microsecond), q.Since)
	assert.Equal(t, at.Add(time.Second).Truncate(time.Microsecond), q.Until)
	assert.True(t, q.Matches(workspace.Event{Time: at.Truncate(time.Microsecond)}),
		"an event stored at the bound's microsecond is inside it, on every store")
}
