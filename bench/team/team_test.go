package team_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/remote"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/bench/team"
	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// roleEnv makes this test binary an agent or a server (as wsctl
// re-executes itself as one).
const roleEnv = "AGENTSPACE_TEAM_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "agent":
		if err := team.RunAgent(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "serve":
		serveChild()
	}
	os.Exit(m.Run())
}

// serveChild serves the DSN of $AGENTSPACE_DSN on the unix socket of
// $TEAM_LISTEN (unix:PATH) until killed, as `wsctl serve` does.
func serveChild() {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, os.Getenv("AGENTSPACE_DSN"), workspace.Options{MustExist: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := server.New(ws, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("unix", strings.TrimPrefix(os.Getenv("TEAM_LISTEN"), "unix:"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	_ = hs.Serve(ln)
	os.Exit(0)
}

// child re-executes this test binary with env added, without the race
// runtime's second of sleep at exit (GORACE's atexit_sleep_ms), which a
// run's servers and agents would each pay as they end.
func child(ctx context.Context, env ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, os.Args[0], "-test.run=^$") // #nosec G204 -- this very test binary
	c.Env = append(append(os.Environ(), env...), wsctltest.QuietRaceExit())
	c.Stderr = os.Stderr
	return c
}

// config is a brief run's: 4 agents, 2 s, a short think time.
func config(t *testing.T, dsn string) team.Config {
	mix, err := team.ParseMix(team.DefaultMix)
	require.NoError(t, err)
	return team.Config{
		DSN: dsn, Agents: 4, Mix: mix, Think: 5 * time.Millisecond, Duration: 2 * time.Second, Out: t.TempDir(),
		OpTimeout: 3 * time.Second,
		Agent:     func(ctx context.Context) *exec.Cmd { return child(ctx, roleEnv+"=agent") },
		Serve: func(ctx context.Context, dsn, listen string) *exec.Cmd {
			return child(ctx, roleEnv+"=serve", "AGENTSPACE_DSN="+dsn, "TEAM_LISTEN="+listen)
		},
	}
}

// requireSound checks a run's report: every invariant held and checked
// something, the operations of the mix were acknowledged, and the report's
// files are there.
func requireSound(t *testing.T, cfg team.Config, rep *team.Report, err error) {
	t.Helper()
	require.NoError(t, err)
	require.NotNil(t, rep)
	assert.True(t, rep.OK)
	require.Len(t, rep.Invariants, 10)
	for _, inv := range rep.Invariants {
		assert.True(t, inv.OK, "%s: %s", inv.Name, inv.Detail)
		assert.Positive(t, inv.Checked, "%s checked nothing", inv.Name)
	}
	ok := map[string]int64{}
	for _, o := range rep.Ops {
		ok[o.Op] = o.OK
		if o.OK > 0 {
			assert.Positive(t, o.P99us, o.Op)
			assert.GreaterOrEqual(t, o.P99us, o.P50us, o.Op)
		}
	}
	for _, op := range []string{"claim", "done", "put", "hot", "lock", "fenced", "unlock", "msg", "note"} {
		assert.Positive(t, ok[op], "no %s acknowledged", op)
	}
	assert.Positive(t, rep.LogEvents)
	assert.NotEmpty(t, rep.Buckets)
	var onDisk team.Report
	b, err := os.ReadFile(filepath.Join(cfg.Out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &onDisk))
	assert.Equal(t, rep.Acked, onDisk.Acked)
	for _, name := range []string{"timeline.svg", "rate.svg", "latency.svg"} {
		b, err := os.ReadFile(filepath.Join(cfg.Out, name))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(b), "<svg") && strings.HasSuffix(string(b), "</svg>\n"), name)
		if name == "timeline.svg" {
			assert.Contains(t, string(b), "<path fill=", name)
		} else {
			assert.Contains(t, string(b), "<polyline", name)
		}
	}
	md, err := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "every invariant held")
	n := 0
	for id := range cfg.Agents {
		f, err := os.Open(filepath.Join(cfg.Out, "agents", fmt.Sprintf("%d.jsonl", id)))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"op":"ready"`) {
				n++
			}
		}
		_ = f.Close()
	}
	assert.Equal(t, rep.Attempts, int64(n), "every attempt is a line of agents/N.jsonl (besides its ready line)")
}

// TestATeamOnSQLiteKeepsEveryInvariant runs 4 agent processes for 2 s on a
// SQLite file.
func TestATeamOnSQLiteKeepsEveryInvariant(t *testing.T) {
	cfg := config(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	rep, err := team.Run(t.Context(), cfg)
	requireSound(t, cfg, rep, err)
}

// TestATeamOnPostgresKeepsEveryInvariant is the same on PostgreSQL.
func TestATeamOnPostgresKeepsEveryInvariant(t *testing.T) {
	cfg := config(t, pgtest.NewDSN(t))
	rep, err := team.Run(t.Context(), cfg)
	requireSound(t, cfg, rep, err)
}

// TestATeamThroughServersSurvivesAKilledServer spreads the agents over two
// servers and SIGKILLs one mid-run: its agents move to the other, and
// nothing acknowledged is lost.
func TestATeamThroughServersSurvivesAKilledServer(t *testing.T) {
	cfg := config(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	cfg.Servers, cfg.KillServerAfter, cfg.Duration = 2, time.Second, 3*time.Second
	rep, err := team.Run(t.Context(), cfg)
	requireSound(t, cfg, rep, err)
	require.Len(t, rep.Marks, 1)
	assert.Contains(t, rep.Marks[0].What, "killed")
	var last int64
	for _, b := range rep.Buckets {
		if b.T > rep.Marks[0].At.Sub(rep.Start).Seconds() {
			for _, o := range b.Ops {
				last += o.N
			}
		}
	}
	assert.Positive(t, last, "the team went on after the kill")
}

// TestALostWriteOrIncrementFailsTheCheck doctors a finished run: a record
// of an artifact write the store never made, then (records restored) a
// counter set back through the library, as a lost increment would leave
// it. Each makes Recheck fail with ErrInvariant, naming the invariant.
func TestALostWriteOrIncrementFailsTheCheck(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	cfg := config(t, dsn)
	cfg.Agents, cfg.Duration = 2, time.Second
	cfg.Mix = team.Mix{"put": 1, "hot": 1}
	rep, err := team.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.True(t, rep.OK)
	_, err = team.Recheck(t.Context(), dsn, cfg.Out)
	require.NoError(t, err, "an untouched run checks again")

	// A write acknowledged at a version the artifact never reached.
	recs := filepath.Join(cfg.Out, "agents", "0.jsonl")
	orig, err := os.ReadFile(recs)
	require.NoError(t, err)
	var put team.Record
	for line := range strings.SplitSeq(strings.TrimSpace(string(orig)), "\n") {
		var r team.Record
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		if r.Op == "put" && r.Err == "" {
			put = r
		}
	}
	require.NotEmpty(t, put.Key, "agent 0 wrote an artifact")
	put.Ver += 1000
	extra, err := json.Marshal(put)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(recs, append(orig, append(extra, '\n')...), 0o600))
	rep, err = team.Recheck(t.Context(), dsn, cfg.Out)
	require.ErrorIs(t, err, team.ErrInvariant)
	assert.False(t, rep.OK)
	assert.Contains(t, err.Error(), "every acknowledged artifact write is there")
	assert.Contains(t, err.Error(), fmt.Sprintf("%s version %d", put.Key, put.Ver))
	md, rerr := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	require.NoError(t, rerr)
	assert.Contains(t, string(md), "INVARIANTS FAILED")

	// The records as they were, and an increment lost in the store.
	require.NoError(t, os.WriteFile(recs, orig, 0o600))
	ws, err := workspace.Open(t.Context(), dsn)
	require.NoError(t, err)
	defer ws.Close()
	page, err := ws.Artifacts().List(t.Context(), workspace.ArtifactFilter{NamePrefix: "team/" + rep.Run + "/hot/"})
	require.NoError(t, err)
	var lost bool
	for _, a := range page.Artifacts {
		if a.Version > 1 {
			_, err := ws.Artifacts().Update(t.Context(), workspace.Write{Actor: "saboteur"}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("0")})
			require.NoError(t, err)
			lost = true
			break
		}
	}
	require.True(t, lost, "a counter was incremented")
	_, err = team.Recheck(t.Context(), dsn, cfg.Out)
	require.ErrorIs(t, err, team.ErrInvariant)
	assert.Contains(t, err.Error(), "each counter equals its acknowledged increments")
}

func TestParseMixRefusesWhatItCannotRead(t *testing.T) {
	m, err := team.ParseMix("claim=3, put=1")
	require.NoError(t, err)
	assert.Equal(t, "claim=3,put=1", m.String())
	for _, bad := range []string{"", "claim", "claim=x", "claim=-1", "fly=3", "claim=0,put=0", "claim=1,claim=2"} {
		_, err := team.ParseMix(bad)
		assert.ErrorIs(t, err, team.ErrBadMix, "%q", bad)
	}
}

func TestRunRefusesABadConfiguration(t *testing.T) {
	good := config(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	for name, edit := range map[string]func(*team.Config){
		"no agents":             func(c *team.Config) { c.Agents = 0 },
		"no end":                func(c *team.Config) { c.Duration, c.Events = 0, 0 },
		"kill without servers":  func(c *team.Config) { c.KillServerAfter = time.Second },
		"failover without time": func(c *team.Config) { c.FailoverCommand = "true" },
		"servers of a server":   func(c *team.Config) { c.DSN, c.Servers = "http://127.0.0.1:1", 2 },
	} {
		c := good
		edit(&c)
		_, err := team.Run(t.Context(), c)
		assert.True(t, errors.Is(err, team.ErrConfig), "%s: %v", name, err)
	}
	_, err := os.Stat(filepath.Join(good.Out, "report.json"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a refused run wrote nothing")
}
