package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTwoAgentsFinishEveryTaskThroughMCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), &out))
	s := out.String()
	assert.Contains(t, s, "done: 4 tasks")
	assert.Equal(t, 4, strings.Count(s, `"action":"done"`), "each task finished once: %s", s)
	assert.Contains(t, s, "<- error no_task", "both agents stop when nothing is ready")
}
