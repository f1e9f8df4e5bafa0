package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Processes: Config.Processes child processes each run W1 at c=1 through
// one server, as that many agents on one host would, each its own program
// with its own connection. Their writes meet in the server's store, which
// puts concurrent ones into one commit. The baseline is W1 at the same
// total concurrency in this process on the same store.

// w1Round is what the parent sends a "w1" child for each round: measure
// for this long.
type w1Round struct {
	ForNs int64 `json:"for_ns"`
}

// w1Result is a "w1" child's answer to a round (or its ready line, or
// its error).
type w1Result struct {
	Ready     bool    `json:"ready,omitempty"`
	Ops       int     `json:"ops,omitempty"`
	ElapsedNs int64   `json:"elapsed_ns,omitempty"`
	LatNs     []int64 `json:"lat_ns,omitempty"`
	CPUNs     int64   `json:"cpu_ns,omitempty"` // the child's own CPU time in the round
	Err       string  `json:"err,omitempty"`
}

// childW1 opens req.DSN, creates its artifact under req.Name, says it is
// ready, then measures W1 at c=1 for each round the parent sends, until
// stdin ends. With op "echo" it measures the same request and answer
// against a bare HTTP server at req.DSN instead (see echoServer).
func childW1(ctx context.Context, req childRequest, in *bufio.Reader, enc *json.Encoder) error {
	var o op
	if req.Op == "echo" {
		o = echoOp(req.DSN)
	} else {
		ws, err := workspace.Open(ctx, req.DSN)
		if err != nil {
			return enc.Encode(w1Result{Err: err.Error()})
		}
		defer ws.Close()
		e := &env{dsn: req.DSN, prefix: req.Name, handles: []*workspace.Workspace{ws}, updates: new(atomic.Int64), content: make([]byte, 1024)}
		_, _ = rand.Read(e.content)
		if o, err = w1(ctx, e, "w1", 1); err != nil {
			return enc.Encode(w1Result{Err: err.Error()})
		}
	}
	if req.CPUProfile != "" {
		f, err := os.Create(req.CPUProfile) // #nosec G304 -- the path the parent made from --cpuprofile
		if err != nil {
			return enc.Encode(w1Result{Err: err.Error()})
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return enc.Encode(w1Result{Err: err.Error()})
		}
		defer pprof.StopCPUProfile()
	}
	if err := enc.Encode(w1Result{Ready: true}); err != nil {
		return err
	}
	for {
		line, err := in.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var r w1Round
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("bench child: round: %w", err)
		}
		cpu0, _ := cpuTime()
		res, err := measure(ctx, 1, time.Duration(r.ForNs), 0, o)
		cpu1, _ := cpuTime()
		ans := w1Result{Ops: res.ops, ElapsedNs: res.elapsed.Nanoseconds(), CPUNs: (cpu1 - cpu0).Nanoseconds()}
		if err != nil {
			ans.Err = err.Error()
		}
		for _, l := range res.lat {
			ans.LatNs = append(ans.LatNs, l.Nanoseconds())
		}
		if err := enc.Encode(ans); err != nil {
			return err
		}
	}
}

// readW1 reads a "w1" child's next answer.
func (c *child) readW1() (w1Result, error) {
	if !c.out.Scan() {
		return w1Result{}, fmt.Errorf("child process ended (%v)", c.out.Err())
	}
	var r w1Result
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("child process: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("child process: %s", r.Err)
	}
	return r, nil
}

// runProcesses measures W1 run by cfg.Processes children through e's
// server (and cfg.Servers-1 more, on cfg.Workspaces workspaces: see
// startWorkspaces), against W1 at that concurrency on base (on every
// workspace's store), alternating. Its second row is as many children
// opening the store themselves (their workspace's DSN), each
// committing on its own, which is what a server spares them: its ratio is
// the served row's rate over it. Its third row is the ceiling of the same
// children's transport on this machine: the same requests and answers
// (W1's JSON, 1 KiB of content each way) from as many processes against a
// bare net/http server on the same kind of listener, which decodes and
// encodes them and stores nothing; its ratio is the served row's rate
// over the bare one.
func runProcesses(ctx context.Context, e, base *env, cfg Config, progress func(string)) ([]Row, error) {
	n := cfg.Processes
	if cfg.Child == nil {
		return nil, errNoChild
	}
	spaces, layout, stop, err := startWorkspaces(ctx, e, base, cfg, progress)
	defer stop()
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("W1 via %s, %d processes%s", e.via, n, layout)
	progress(label + ": starting them")
	echoDSN, stopEcho, err := echoServer(e.via)
	if err != nil {
		return nil, err
	}
	defer stopEcho()
	var kids, selves, echoes []*child
	all := func() []*child { return append(append(append([]*child(nil), kids...), selves...), echoes...) }
	defer func() {
		for _, c := range all() {
			go func() {
				for c.out.Scan() {
				}
				close(c.read)
			}()
		}
		for _, c := range all() {
			c.stop()
		}
	}()
	profile := func(kind string, i int) string {
		if cfg.ChildProfile == "" {
			return ""
		}
		return fmt.Sprintf("%s.%s-%d", cfg.ChildProfile, kind, i)
	}
	for i := range n {
		// Child i on workspace i mod W, through its server i/W mod S.
		w := spaces[i%len(spaces)]
		c, err := startChild(ctx, cfg.Child, childRequest{Op: "w1", DSN: w.servers[(i/len(spaces))%len(w.servers)], Name: fmt.Sprintf("%s/p%d", e.prefix, i), CPUProfile: profile("w1", i)})
		if err != nil {
			return nil, err
		}
		kids = append(kids, c)
		c, err = startChild(ctx, cfg.Child, childRequest{Op: "w1", DSN: w.dsn, Name: fmt.Sprintf("%s/s%d", e.prefix, i), CPUProfile: profile("store", i)})
		if err != nil {
			return nil, err
		}
		selves = append(selves, c)
		c, err = startChild(ctx, cfg.Child, childRequest{Op: "echo", DSN: echoDSN, CPUProfile: profile("echo", i)})
		if err != nil {
			return nil, err
		}
		echoes = append(echoes, c)
	}
	for _, c := range all() {
		if _, err := c.readW1(); err != nil {
			return nil, err
		}
	}
	// W1 has a subscriber on each store; the baseline is c=n in process
	// on the same stores, goroutine g on workspace g mod W.
	per := (n + len(spaces) - 1) / len(spaces)
	ops := make([]op, len(spaces))
	for k, w := range spaces {
		unsubscribe, err := drain(ctx, w.local.handles[0])
		if err != nil {
			return nil, err
		}
		defer unsubscribe()
		if ops[k], err = w1(ctx, w.local, "w1p", per); err != nil {
			return nil, err
		}
	}
	inproc := func(ctx context.Context, g int) (time.Duration, error) {
		return ops[g%len(ops)](ctx, g/len(ops))
	}
	slice := cfg.Duration / (2 * rounds)
	round, _ := json.Marshal(w1Round{ForNs: slice.Nanoseconds()})
	round = append(round, '\n')
	var (
		ours, raw, self, bare procTotals
		// The store's committer, which the server's handle shares with
		// base's: its groups while the children ran, and while c=n ran
		// in this process.
		served, inProc committerTotals
		// perSpace is each workspace's store transactions while the
		// children ran.
		perSpace = make([]int64, len(spaces))
	)
	for i := range rounds {
		progress(fmt.Sprintf("%s: in process (round %d/%d)", label, i+1, rounds))
		cpu0, _ := cpuTime()
		c0 := inProc.start(base.handles[0])
		res, err := measure(ctx, n, slice, 0, inproc)
		if err != nil {
			return nil, fmt.Errorf("in process: %w", err)
		}
		inProc.add(base.handles[0], c0)
		cpu1, _ := cpuTime()
		raw.add(res)
		raw.cpu += cpu1 - cpu0
		progress(fmt.Sprintf("%s: processes (round %d/%d)", label, i+1, rounds))
		before := make([]int64, len(spaces))
		for k, w := range spaces {
			before[k] = w.updates()
		}
		c0 = served.start(base.handles[0])
		if err := ours.round(kids, round); err != nil {
			return nil, err
		}
		served.add(base.handles[0], c0)
		for k, w := range spaces {
			perSpace[k] += w.updates() - before[k]
		}
		progress(fmt.Sprintf("%s: on the store (round %d/%d)", label, i+1, rounds))
		if err := self.round(selves, round); err != nil {
			return nil, err
		}
		progress(fmt.Sprintf("%s: bare HTTP (round %d/%d)", label, i+1, rounds))
		if err := bare.round(echoes, round); err != nil {
			return nil, err
		}
	}
	variant := fmt.Sprintf("via %s, %d processes%s", e.via, n, layout)
	stores := "the same store"
	if len(spaces) > 1 {
		stores = fmt.Sprintf("the same %d stores (goroutine g on workspace g mod %d)", len(spaces), len(spaces))
	}
	row := Row{
		Workload: "W1", Variant: variant, Backend: e.backend, Concurrency: n,
		OpsPerSec: ours.rate(), P50us: ours.percentile(0.50), P99us: ours.percentile(0.99),
		RawOpsPerSec: raw.rate(), RawP50us: raw.percentile(0.50), RawP99us: raw.percentile(0.99),
		CPUusPerOp: ours.serverCPU(), RawCPUusPerOp: raw.serverCPU(),
		Note: fmt.Sprintf("%d child processes at c=1, each its own client of the server; CPU/OP is the server's, the clients' %s; baseline (raw columns): c=%d in process on %s",
			n, ours.clientCPU(), n, stores),
	}
	switch {
	case len(spaces) > 1:
		through := "its own server"
		if cfg.Servers > 1 {
			through = fmt.Sprintf("%d servers of its own (child i through server i/%d mod %d)", cfg.Servers, len(spaces), cfg.Servers)
		}
		counts := make([]string, len(perSpace))
		for k, c := range perSpace {
			counts[k] = strconv.FormatInt(c, 10)
		}
		row.Note += fmt.Sprintf("; over %d workspaces on the database, the DSN's and its siblings (child i on workspace i mod %d), each through %s in this process, each server a store of its own; CPU/OP is all the servers'; the committer figures are the first workspace's; store transactions per workspace: %s",
			len(spaces), len(spaces), through, strings.Join(counts, ", "))
	case cfg.Servers > 1:
		row.Note += fmt.Sprintf("; through %d servers in this process, each a store of its own on the database (child i through server i mod %d); the committer figures are the first server's",
			cfg.Servers, cfg.Servers)
	}
	if s := served.String(); s != "" {
		row.Note += "; the store's committer was " + s
		if s := inProc.String(); s != "" {
			row.Note += fmt.Sprintf(" (c=%d in process: %s)", n, s)
		}
		if c := served.cycle(); c > 0 && row.P50us > 0 {
			// The clients come back in cohorts: a write waits for the
			// group under way, then for its own (docs/performance.md).
			row.Note += fmt.Sprintf("; a client's p50 is %.1f committer cycles (gathering and running a group: %s)",
				row.P50us/float64(c.Microseconds()), c.Round(10*time.Microsecond))
		}
	}
	ours.noteMachine(&row)
	if row.RawOpsPerSec > 0 {
		row.Ratio = row.OpsPerSec / row.RawOpsPerSec
	}
	if ours.ops > 0 {
		var commits int64
		for _, c := range perSpace {
			commits += c
		}
		row.CommitsPerOp = float64(commits) / float64(ours.ops)
	}
	onStore := fmt.Sprintf("%d processes on the store", n)
	if len(spaces) > 1 {
		onStore = fmt.Sprintf("%d processes on the stores, %d workspaces", n, len(spaces))
	}
	alone := Row{
		Workload: "W1", Variant: onStore, Backend: e.backend, Concurrency: n,
		OpsPerSec: self.rate(), P50us: self.percentile(0.50), P99us: self.percentile(0.99),
		Note: fmt.Sprintf("the same %d processes opening the store themselves, each committing on its own; the clients' %s; ratio: the served row's rate over this",
			n, self.clientCPU()),
	}
	self.noteMachine(&alone)
	if alone.OpsPerSec > 0 {
		alone.Ratio = row.OpsPerSec / alone.OpsPerSec
	}
	floor := Row{
		Workload: "HTTP", Variant: fmt.Sprintf("bare via %s, %d processes", e.via, n), Backend: "-", Concurrency: n,
		OpsPerSec: bare.rate(), P50us: bare.percentile(0.50), P99us: bare.percentile(0.99),
		CPUusPerOp: bare.serverCPU(),
		Note: fmt.Sprintf("W1's request and answer from %d processes to a bare net/http server that decodes and encodes them and stores nothing: the transport's ceiling here; the clients' %s; ratio: the served row's rate over this",
			n, bare.clientCPU()),
	}
	bare.noteMachine(&floor)
	if floor.OpsPerSec > 0 {
		floor.Ratio = row.OpsPerSec / floor.OpsPerSec
	}
	if row.CPUusPerOp > 0 && row.RawCPUusPerOp > 0 && floor.CPUusPerOp > 0 {
		// What the server spends beyond the engine (in process, the same
		// store and concurrency) and the bare transport: issue #40's
		// figure.
		row.Note += fmt.Sprintf("; the server's own CPU per op beyond both: %.0fµs", row.CPUusPerOp-row.RawCPUusPerOp-floor.CPUusPerOp)
	}
	return []Row{row, alone, floor}, nil
}

// procWorkspace is one workspace the children of runProcesses write to.
type procWorkspace struct {
	dsn     string         // its store
	servers []string       // the DSNs of the servers in front of it
	counts  []func() int64 // their stores' transactions
	// local is its store in this process, the first server's: the
	// in-process baseline runs on it, and W1's subscriber follows it.
	local *env
}

// updates is the transactions of the workspace's servers' stores.
func (w *procWorkspace) updates() int64 {
	var sum int64
	for _, c := range w.counts {
		sum += c()
	}
	return sum
}

// startWorkspaces lays out runProcesses' servers: cfg.Workspaces
// workspaces (the first is base's, the others its siblings: WorkspaceDSN),
// each with cfg.Servers servers on e's listener, each server a store of
// its own. The first workspace's first server is e's, which shares base's
// store. layout is what the row's variant adds (", 4 workspaces, 2
// servers each"); stop stops the servers started, and is never nil.
func startWorkspaces(ctx context.Context, e, base *env, cfg Config, progress func(string)) (spaces []*procWorkspace, layout string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	nw, ns := max(cfg.Workspaces, 1), max(cfg.Servers, 1)
	if nw > 1 {
		if err := CheckWorkspaces(base.dsn, nw, cfg.Processes); err != nil {
			return nil, "", stop, err
		}
		layout = fmt.Sprintf(", %d workspaces", nw)
	}
	if ns > 1 {
		layout += fmt.Sprintf(", %d servers", ns)
		if nw > 1 {
			layout += " each"
		}
	}
	for k := range nw {
		w := &procWorkspace{}
		if k == 0 {
			w.dsn, w.local = base.dsn, base
			w.servers, w.counts = []string{e.dsn}, []func() int64{e.updates.Load}
		} else if w.dsn, err = WorkspaceDSN(base.dsn, k+1); err != nil {
			return nil, "", stop, err
		}
		for len(w.servers) < ns {
			progress(fmt.Sprintf("W1 via %s, %d processes%s: starting server %d of workspace %d", e.via, cfg.Processes, layout, len(w.servers)+1, k+1))
			srv, err := startServer(ctx, w.dsn, e.via)
			if err != nil {
				return nil, "", stop, fmt.Errorf("workspace %d: %w", k+1, err)
			}
			stops = append(stops, srv.stop)
			if w.local == nil {
				w.local = srv.store
			}
			w.servers = append(w.servers, srv.dsn)
			w.counts = append(w.counts, srv.updates.Load)
		}
		spaces = append(spaces, w)
	}
	return spaces, layout, stop, nil
}

// procTotals adds up the rounds of a group of children, and this
// process's CPU time while they ran (only the server runs here then).
type procTotals struct {
	result
	cpu, childCPU time.Duration
	// machine is every process's CPU while the children ran: theirs,
	// the server's and, on this machine, the database's.
	machine machineCPU
}

// round has each child measure one round and adds their answers.
func (t *procTotals) round(kids []*child, round []byte) error {
	mark := readMachine()
	cpu0, _ := cpuTime()
	for _, c := range kids {
		if _, err := c.stdin.Write(round); err != nil {
			return fmt.Errorf("child process: %w", err)
		}
	}
	var longest time.Duration
	for _, c := range kids {
		r, err := c.readW1()
		if err != nil {
			return err
		}
		t.ops += r.Ops
		t.childCPU += time.Duration(r.CPUNs)
		longest = max(longest, time.Duration(r.ElapsedNs))
		for _, l := range r.LatNs {
			t.lat = append(t.lat, time.Duration(l))
		}
	}
	cpu1, _ := cpuTime()
	t.machine.add(mark)
	t.cpu += cpu1 - cpu0
	t.elapsed += longest
	return nil
}

// serverCPU is this process's CPU per op in µs while the children ran.
func (t *procTotals) serverCPU() float64 {
	if t.ops == 0 {
		return 0
	}
	return float64(t.cpu.Microseconds()) / float64(t.ops)
}

// clientCPU says the children's CPU per op.
func (t *procTotals) clientCPU() string {
	if t.ops == 0 {
		return "CPU per op unknown"
	}
	return fmt.Sprintf("CPU per op %dµs", (t.childCPU / time.Duration(t.ops)).Microseconds())
}

// noteMachine gives r the machine's CPU per op over t's rounds, figure
// and note, where it could be read.
func (t *procTotals) noteMachine(r *Row) {
	if t.ops > 0 {
		r.ClientCPUusPerOp = float64(t.childCPU.Microseconds()) / float64(t.ops)
	}
	if us, busy := t.machine.perOp(t.ops); us > 0 {
		r.MachineCPUusPerOp, r.MachineBusy = us, busy
		r.Note += "; " + MachineSplitNote(*r)
	}
}

// committerTotals adds up what a store's committer did over the rounds of
// a row (workspace.CommitStats' deltas) and the rounds' wall time.
type committerTotals struct {
	stats workspace.CommitStats
	wall  time.Duration
}

// committerMark is where a round began: the counters, and the time.
type committerMark struct {
	stats workspace.CommitStats
	at    time.Time
}

// start marks the beginning of a round on ws's store.
func (c *committerTotals) start(ws *workspace.Workspace) committerMark {
	s, _ := ws.CommitStats()
	return committerMark{stats: s, at: time.Now()}
}

// add counts the round begun at m.
func (c *committerTotals) add(ws *workspace.Workspace, m committerMark) {
	s, ok := ws.CommitStats()
	if !ok {
		return
	}
	c.wall += time.Since(m.at)
	c.stats.Groups += s.Groups - m.stats.Groups
	c.stats.Writes += s.Writes - m.stats.Writes
	c.stats.Running += s.Running - m.stats.Running
	c.stats.Gathering += s.Gathering - m.stats.Gathering
}

// cycle is the committer's time per group, gathering and running it; 0
// when it ran none.
func (c *committerTotals) cycle() time.Duration {
	if c.stats.Groups == 0 {
		return 0
	}
	return (c.stats.Running + c.stats.Gathering) / time.Duration(c.stats.Groups)
}

// String says how busy the committer was and what a group was like, or
// "" when it ran none.
func (c *committerTotals) String() string {
	g := c.stats.Groups
	if g == 0 || c.wall <= 0 {
		return ""
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / c.wall.Seconds() }
	return fmt.Sprintf("busy %.0f%% of the time (running groups %.0f%%, gathering them %.0f%%), %.1f writes per group, %s per group's transaction",
		pct(c.stats.Running+c.stats.Gathering), pct(c.stats.Running), pct(c.stats.Gathering),
		float64(c.stats.Writes)/float64(g), (c.stats.Running / time.Duration(g)).Round(10*time.Microsecond))
}

// machineCPU is a reading of MachineCPU, or (as a row's totals) the sum
// of its differences over the rounds of a row.
type machineCPU struct {
	busy, total time.Duration
	ok          bool
}

// readMachine reads MachineCPU, where a round begins.
func readMachine() machineCPU {
	b, t, ok := MachineCPU()
	return machineCPU{busy: b, total: t, ok: ok}
}

// add counts the machine's CPU since the reading mark.
func (m *machineCPU) add(mark machineCPU) {
	now := readMachine()
	if mark.ok && now.ok && now.total > mark.total {
		m.busy += now.busy - mark.busy
		m.total += now.total - mark.total
		m.ok = true
	}
}

// perOp is the machine's CPU per op in µs over ops, and the share of its
// CPUs that were busy; 0 when it could not be read.
func (m *machineCPU) perOp(ops int) (us, busy float64) {
	if !m.ok || ops == 0 || m.total <= 0 {
		return 0, 0
	}
	return float64(m.busy.Microseconds()) / float64(ops), float64(m.busy) / float64(m.total)
}

// MachineNote says a row's machine CPU per op (µs) and the share of the
// CPUs busy (0 to 1) as the many-processes rows' notes do, etcd's too.
func MachineNote(usPerOp, busy float64) string {
	return fmt.Sprintf("the machine's CPU per op, every process counted: %.0fµs, its CPUs %.0f%% busy", usPerOp, 100*busy)
}

// MachineSplitNote is MachineNote for a many-processes row, with the
// machine's CPU per op split: this process (the server and the store's
// driver, where the row has one), the client processes, and the rest (a
// database server's processes, the kernel's threads, anything else that
// ran meanwhile).
func MachineSplitNote(r Row) string {
	rest := r.MachineCPUusPerOp - r.CPUusPerOp - r.ClientCPUusPerOp
	server := ""
	if r.CPUusPerOp > 0 {
		server = fmt.Sprintf("the server %.0fµs, ", r.CPUusPerOp)
	}
	return fmt.Sprintf("the machine's CPU per op, every process counted: %.0fµs (%sthe clients %.0fµs, the rest %.0fµs), its CPUs %.0f%% busy",
		r.MachineCPUusPerOp, server, r.ClientCPUusPerOp, max(rest, 0), 100*r.MachineBusy)
}
