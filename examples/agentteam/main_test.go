package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestTwoTeamsAtOnceFinishTheirRuns starts two runs in the same instant on
// one fresh store of each file backend: each gets its own run id, every task
// of each run is done once, every artifact written, every lock released, and
// each prints its tasks as a table.
func TestTwoTeamsAtOnceFinishTheirRuns(t *testing.T) {
	for _, tc := range []struct{ scheme, dsn string }{
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "team.db")},
		{"json", "json:" + filepath.Join(t.TempDir(), "team")},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var (
				outs [2]bytes.Buffer
				errs [2]error
				wg   sync.WaitGroup
			)
			for i := range outs {
				wg.Go(func() { errs[i] = run(ctx, tc.dsn, &outs[i]) })
			}
			wg.Wait()
			require.NoError(t, errs[0], outs[0].String())
			require.NoError(t, errs[1], outs[1].String())

			runLine := regexp.MustCompile(`(?m)^agentteam: run (\S+) on `)
			var ids []string
			for i := range outs {
				out := outs[i].String()
				m := runLine.FindStringSubmatch(out)
				require.NotNil(t, m, out)
				ids = append(ids, m[1])
				assert.Regexp(t, `(?m)^TASK +STATUS +BY +TRIES +ARTIFACT$`, out)
				for _, title := range []string{"design the API", "implement the handlers", "write the tests", "review the change"} {
					assert.Regexp(t, `(?m)^`+title+` +done +(worker-[12]|reviewer) +1 +runs/`+regexp.QuoteMeta(m[1])+`/`, out)
				}
				assert.NotContains(t, out, "map[", "a table, not a Go map")
			}
			assert.NotEqual(t, ids[0], ids[1], "runs started together have their own ids")

			ws, err := workspace.Open(ctx, tc.dsn)
			require.NoError(t, err)
			defer ws.Close()
			st, err := ws.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, 8, st.Tasks[workspace.TaskDone])
			assert.Equal(t, 10, st.Artifacts)
			assert.Equal(t, 2, st.Notes)
			assert.Empty(t, st.Locks, "every lock was released")
			claims, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventTaskClaimed}})
			require.NoError(t, err)
			assert.Len(t, claims.Events, 8, "each task claimed once")
		})
	}
}

// TestTheTeamRunsOnEveryScheme: the schemes the doc comment shows are linked.
func TestTheTeamRunsOnEveryScheme(t *testing.T) {
	assert.Subset(t, driver.Schemes(), []string{"sqlite", "json", "postgres", "postgresql"})
}
