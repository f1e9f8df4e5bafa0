package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestGCPacerSizesBatchesToTheTargetTime: the next batch is sized from the
// last one's time to take the target, changing at most twofold, within
// [minGCBatch, max]; without a target (a store that rewrites its log) the
// size stays.
func TestGCPacerSizesBatchesToTheTargetTime(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name      string
		size, max int64
		n         int64
		took      time.Duration
		want      int64
	}{
		{"fast batch doubles", 16, 10000, 16, ms, 32},
		{"on target stays", 1000, 10000, 1000, 10 * ms, 1000},
		{"a little slow shrinks in proportion", 1000, 10000, 1000, 16 * ms, 625},
		{"very slow halves only", 1000, 10000, 1000, 500 * ms, 500},
		{"never below the minimum", 20, 10000, 20, time.Second, minGCBatch},
		{"never above the maximum", 8000, 10000, 8000, ms, 10000},
		{"a short last batch does not shrink it", 1000, 10000, 10, ms, 1000},
		{"an instant batch doubles", 100, 10000, 100, 0, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gcPacer{size: c.size, max: c.max, target: 10 * ms}
			g.learn(c.n, c.took)
			assert.Equal(t, c.want, g.size)
		})
	}
	g := gcPacer{size: 500, max: 500}
	g.learn(500, time.Second)
	assert.Equal(t, int64(500), g.size, "no target: the size stays")
}
