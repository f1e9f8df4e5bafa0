package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
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

// BenchmarkPolicyCost measures W1 (a version-checked update), W2 (a get
// of 1 KiB, as an actor) and W5 (claim and complete) on SQLite and
// PostgreSQL with no policy and with a 50-rule one, one after the other in
// one run: compare each pair's ns/op for the cost of enforcement.
func BenchmarkPolicyCost(b *testing.B) {
	stores := map[string]func(b *testing.B) string{
		"sqlite":   func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "ws.db") },
		"postgres": func(b *testing.B) string { return pgtest.NewDSN(b) },
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, w := range []string{"W1", "W2", "W5"} {
			for _, mode := range []string{"none", "rules50"} {
				b.Run(backend+"/"+w+"/"+mode, func(b *testing.B) { benchPolicy(b, stores[backend](b), w, mode == "rules50") })
			}
		}
	}
}

func benchPolicy(b *testing.B, dsn, w string, withPolicy bool) {
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
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "bench", IfVersion: v}, workspace.ByName("bench/a"), workspace.ArtifactChange{Content: []byte(fmt.Sprint(i))})
			if err != nil {
				b.Fatal(err)
			}
			v = a.Version
		}
	case "W2":
		for b.Loop() {
			if _, err := ws.Artifacts().Get(ctx, workspace.ByName("bench/a")); err != nil {
				b.Fatal(err)
			}
		}
	case "W5":
		for b.Loop() {
			b.StopTimer()
			_, err := ws.Tasks().Create(ctx, as, workspace.NewTask{Title: "t"})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			t, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bench", Lease: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ws.Tasks().Complete(ctx, as, t.ID, workspace.TaskResult{Summary: "ok"}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
