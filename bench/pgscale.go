package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/workspace"
)

// Scaling on Postgres: how far one workspace goes with more servers in
// front of it, and how far several do. One workspace's writers take turns
// on its advisory lock (the writers' lock, which keeps the event log
// gap-free in commit order), so adding servers in front of one schema
// adds no write throughput past what one writer at a time commits;
// workspaces in schemas of their own have locks of their own and add up
// until the database itself is the limit. RunPgScale measures both, each
// as a ratio to the raw driver doing W1's statements with as many
// goroutines, alternating with it as the other rows do.

// PgScaleConfig configures RunPgScale.
type PgScaleConfig struct {
	// DSN is a Postgres DSN; each workspace gets a fresh schema in its
	// database (ws_schema is set per workspace), dropped at the end.
	DSN string
	// Clients is how many goroutines update in all (default 32), split
	// evenly over the workspaces, so that every row offers the same load.
	Clients int
	// Workspaces are the workspace counts to measure (default 1, 2, 4).
	Workspaces []int
	// Servers is how many servers stand in front of each workspace
	// (default 2), each with a store of its own, as `wsctl serve`
	// processes would.
	Servers int
	// Duration is each side's measuring time per round (default 2s); two
	// rounds of ours and raw alternate.
	Duration time.Duration
	// Progress, when set, gets a line per step.
	Progress io.Writer
}

// PgScaleRow is one measured layout.
type PgScaleRow struct {
	Workspaces int `json:"workspaces"`
	Servers    int `json:"servers_per_workspace"`
	Clients    int `json:"clients"` // in all
	// OpsPerSec is W1 updates per second in all, through the servers;
	// RawOpsPerSec the raw driver's with as many goroutines, each
	// workspace's on a raw schema of its own; Ratio is OpsPerSec/RawOpsPerSec.
	OpsPerSec    float64 `json:"ops_per_sec"`
	RawOpsPerSec float64 `json:"raw_ops_per_sec"`
	Ratio        float64 `json:"ratio"`
	// CommitsPerOp counts the servers' store transactions per update:
	// below 1 is group commit.
	CommitsPerOp float64 `json:"commits_per_op"`
}

// RunPgScale measures W1 (a conditional update of a 1 KiB artifact, each
// goroutine its own) through cfg.Servers servers on each of 1..N
// workspaces, against the raw driver.
func RunPgScale(ctx context.Context, cfg PgScaleConfig) ([]PgScaleRow, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 32
	}
	if len(cfg.Workspaces) == 0 {
		cfg.Workspaces = []int{1, 2, 4}
	}
	if cfg.Servers <= 0 {
		cfg.Servers = 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}
	progress := progressFunc(cfg.Progress)
	defer progress("")
	var rows []PgScaleRow
	for _, n := range cfg.Workspaces {
		progress(fmt.Sprintf("%d workspaces through %d servers each: starting", n, cfg.Servers))
		row, err := pgScaleRow(ctx, cfg, n, progress)
		if err != nil {
			return rows, fmt.Errorf("%d workspaces: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func pgScaleRow(ctx context.Context, cfg PgScaleConfig, n int, progress func(string)) (PgScaleRow, error) {
	per := max(cfg.Clients/n, 1) // goroutines per workspace
	u, err := url.Parse(cfg.DSN)
	if err != nil {
		return PgScaleRow{}, err
	}
	var (
		ours, raws []op
		updates    []func() int64
		cleanups   []func()
	)
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	for i := range n {
		q := u.Query()
		q.Set("ws_schema", fmt.Sprintf("bench_scale_%d_%d", time.Now().UnixNano()%1e9, i))
		v := *u
		v.RawQuery = q.Encode()
		dsn := v.String()
		cleanups = append(cleanups, func() { dropSchema(dsn, q.Get("ws_schema")) })
		// The workspace's servers, each its own store on the schema.
		clients := &env{}
		for range cfg.Servers {
			srv, err := startServer(ctx, dsn, "tcp")
			if err != nil {
				return PgScaleRow{}, err
			}
			cleanups = append(cleanups, srv.stop)
			updates = append(updates, srv.updates.Load)
			ws, err := workspace.Open(ctx, srv.dsn, workspace.Options{Private: true})
			if err != nil {
				return PgScaleRow{}, err
			}
			cleanups = append(cleanups, func() { _ = ws.Close() })
			clients.handles = append(clients.handles, ws)
		}
		e, err := newEnv(ctx, dsn, 0, false)
		if err != nil {
			return PgScaleRow{}, err
		}
		// Goroutine w goes through server w mod Servers.
		through := *e
		through.handles = clients.handles
		o, err := w1(ctx, &through, "scale", per)
		if err != nil {
			return PgScaleRow{}, err
		}
		ours = append(ours, o)
		r, err := openRaw(ctx, e)
		if err != nil {
			return PgScaleRow{}, err
		}
		cleanups = append(cleanups, r.close)
		ro, done, err := r.op(ctx, spec{workload: "W1", c: per})
		if err != nil {
			return PgScaleRow{}, err
		}
		cleanups = append(cleanups, done)
		if ro == nil {
			return PgScaleRow{}, errors.New("no raw W1 baseline for this DSN")
		}
		raws = append(raws, ro)
	}
	// Goroutine g works on workspace g / per as its goroutine g mod per.
	spread := func(ops []op) op {
		return func(ctx context.Context, g int) (time.Duration, error) {
			return ops[g/per](ctx, g%per)
		}
	}
	total := n * per
	count := func() int64 {
		var s int64
		for _, u := range updates {
			s += u()
		}
		return s
	}
	var our, raw result
	var commits int64
	for round := range 2 {
		progress(fmt.Sprintf("%d workspaces: ours, round %d", n, round+1))
		before := count()
		res, err := measure(ctx, total, cfg.Duration, 0, spread(ours))
		if err != nil {
			return PgScaleRow{}, err
		}
		commits += count() - before
		our.add(res)
		progress(fmt.Sprintf("%d workspaces: raw, round %d", n, round+1))
		res, err = measure(ctx, total, cfg.Duration, 0, spread(raws))
		if err != nil {
			return PgScaleRow{}, fmt.Errorf("raw: %w", err)
		}
		raw.add(res)
	}
	row := PgScaleRow{Workspaces: n, Servers: cfg.Servers, Clients: total, OpsPerSec: our.rate(), RawOpsPerSec: raw.rate()}
	if row.RawOpsPerSec > 0 {
		row.Ratio = row.OpsPerSec / row.RawOpsPerSec
	}
	if our.ops > 0 {
		row.CommitsPerOp = float64(commits) / float64(our.ops)
	}
	return row, nil
}

// dropSchema drops a workspace's schema RunPgScale made, best effort.
func dropSchema(dsn, schema string) {
	p, err := driver.ParseDSN(dsn)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.Config.DSN)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}
