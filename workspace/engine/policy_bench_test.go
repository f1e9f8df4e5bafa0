package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// rules50 is a policy of 50 rules; the benchmark's actor holds the last
// role, whose last pattern is the one that grants, so every check walks
// every rule of its role.
func rules50() string {
	var b strings.Builder
	for r := range 10 {
		fmt.Fprintf(&b, "[roles.r%d]\n", r)
		fmt.Fprintf(&b, "artifacts_read = [\"x%d/**\", \"y%d/*.md\", \"bench/**\"]\n", r, r)
		fmt.Fprintf(&b, "artifacts_write = [\"x%d/**\", \"bench/*\"]\n", r)
		if r == 9 {
			b.WriteString("tasks = [\"claim\", \"finish\", \"add\"]\n")
		}
	}
	b.WriteString("[actors]\nroot = [\"admin\"]\nbench = [\"r9\"]\n")
	return b.String()
}

// BenchmarkPolicyCost measures the cost of enforcement: W1 (a
// version-checked update), W2 (a get of 1 KiB, as an actor) and W5 (claim
// and complete) on SQLite and PostgreSQL, each against two stores, one
// with no policy and one with a 50-rule policy, the two interleaved op by
// op so that the machine's load falls on both alike. It reports each
// side's median time per op (none-p50-ns, policy-p50-ns) and their ratio
// (throughput with the policy over without: 1 is free, the target is at
// least 0.95).
func BenchmarkPolicyCost(b *testing.B) {
	stores := map[string]func(b *testing.B) string{
		"sqlite":   func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "ws.db") },
		"postgres": func(b *testing.B) string { return pgtest.NewDSN(b) },
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, w := range []string{"W1", "W2", "W5"} {
			b.Run(backend+"/"+w, func(b *testing.B) {
				none := policyStep(b, stores[backend](b), w, false)
				pol := policyStep(b, stores[backend](b), w, true)
				var tNone, tPol []time.Duration
				for i := 0; b.Loop(); i++ {
					// Alternate which side goes first, so neither always
					// follows the other's write.
					first, second, t1, t2 := none, pol, &tNone, &tPol
					if i%2 == 1 {
						first, second, t1, t2 = pol, none, &tPol, &tNone
					}
					d, err := first(i)
					if err != nil {
						b.Fatal(err)
					}
					*t1 = append(*t1, d)
					if d, err = second(i); err != nil {
						b.Fatal(err)
					}
					*t2 = append(*t2, d)
				}
				// Medians: on a loaded machine a few ops wait whole
				// scheduler slices, and means follow those.
				mNone, mPol := median(tNone), median(tPol)
				b.ReportMetric(float64(mNone.Nanoseconds()), "none-p50-ns")
				b.ReportMetric(float64(mPol.Nanoseconds()), "policy-p50-ns")
				b.ReportMetric(float64(mNone)/float64(mPol), "ratio")
			})
		}
	}
}

// policyStep opens a store for workload w, with or without the 50-rule
// policy, and returns one timed step of it.
func policyStep(b *testing.B, dsn, w string, withPolicy bool) func(i int) (time.Duration, error) {
	ctx := workspace.AsActor(context.Background(), "bench")
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(b, err)
	b.Cleanup(func() { _ = ws.Close() })
	if withPolicy {
		src := rules50()
		_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(src)})
		require.NoError(b, err)
	}
	as := workspace.Write{Actor: "bench"}
	body := []byte(strings.Repeat("x", 1024))
	a, err := ws.Artifacts().Create(ctx, as, workspace.NewArtifact{Name: "bench/a", Content: body})
	require.NoError(b, err)
	switch w {
	case "W1":
		v := a.Version
		return func(i int) (time.Duration, error) {
			start := time.Now()
			a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "bench", IfVersion: v}, workspace.ByName("bench/a"), workspace.ArtifactChange{Content: []byte(fmt.Sprint(i))})
			v = a.Version
			return time.Since(start), err
		}
	case "W2":
		return func(int) (time.Duration, error) {
			start := time.Now()
			_, err := ws.Artifacts().Get(ctx, workspace.ByName("bench/a"))
			return time.Since(start), err
		}
	}
	return func(int) (time.Duration, error) {
		if _, err := ws.Tasks().Create(ctx, as, workspace.NewTask{Title: "t"}); err != nil {
			return 0, err
		}
		start := time.Now()
		t, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bench", Lease: time.Minute})
		if err != nil {
			return 0, err
		}
		_, err = ws.Tasks().Complete(ctx, as, t.ID, workspace.TaskResult{Summary: "ok"})
		return time.Since(start), err
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
