package team

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/workspace"
)

// Config is a team run.
type Config struct {
	// DSN is the workspace: a store's DSN, or a server's URL (http://,
	// https://, http+unix://). The run creates it if it is a store that
	// does not exist.
	DSN      string
	Agents   int
	Mix      Mix
	Think    time.Duration
	Duration time.Duration // run this long (0: until Events)
	Events   int64         // or until the log has grown by this many events (0: until Duration)
	Hot      int           // hot counters (default 3)
	Locks    int           // fenced artifacts under leases (default 4)
	// Servers, when positive, starts this many servers (Serve) in front of
	// DSN's store and spreads the agents over them.
	Servers int
	// KillServerAfter, with Servers, SIGKILLs the first server this long
	// into the run; its agents move to the others.
	KillServerAfter time.Duration
	// FailoverCommand, run by sh -c FailoverAfter into the run, fails the
	// store over (e.g. promotes a standby); agents retry meanwhile.
	FailoverCommand string
	FailoverAfter   time.Duration
	// Out is the directory the report and the agents' records go to.
	Out string
	// Agent returns the command of an agent process (RunAgent behind it).
	Agent func(ctx context.Context) *exec.Cmd
	// Serve returns the command of a server of dsn listening on listen
	// (unix:/path), which it must not create (the store exists).
	Serve func(ctx context.Context, dsn, listen string) *exec.Cmd
	// Progress, if set, receives a line now and then.
	Progress io.Writer
	// Seed seeds the agents' choices (0: from the clock).
	Seed int64
	// OpTimeout bounds an agent's attempt (default DefaultOpTimeout).
	OpTimeout time.Duration
}

// Errors of Run's configuration.
var (
	ErrConfig = errors.New("team: bad configuration")
	// ErrInvariant is Run's error when the run broke an invariant: the
	// report says which.
	ErrInvariant = errors.New("team: an invariant failed")
)

func (c *Config) check() error {
	switch {
	case c.DSN == "":
		return fmt.Errorf("%w: no DSN", ErrConfig)
	case c.Agents < 1 || c.Agents > 2000:
		return fmt.Errorf("%w: agents %d is not between 1 and 2000", ErrConfig, c.Agents)
	case c.Duration <= 0 && c.Events <= 0:
		return fmt.Errorf("%w: neither a duration nor a number of events", ErrConfig)
	case c.Duration < 0 || c.Events < 0 || c.Think < 0:
		return fmt.Errorf("%w: a negative duration, think time or number of events", ErrConfig)
	case c.Mix.sum() == 0:
		return fmt.Errorf("%w: the mix weighs nothing", ErrConfig)
	case c.Agent == nil:
		return fmt.Errorf("%w: no agent command", ErrConfig)
	case c.Servers < 0 || c.Servers > 64:
		return fmt.Errorf("%w: servers %d is not between 0 and 64", ErrConfig, c.Servers)
	case c.Servers > 0 && c.Serve == nil:
		return fmt.Errorf("%w: servers but no server command", ErrConfig)
	case c.Servers > 0 && isServer(c.DSN):
		return fmt.Errorf("%w: --servers starts servers in front of a store, and %s is a server", ErrConfig, workspace.RedactDSN(c.DSN))
	case c.KillServerAfter > 0 && c.Servers < 2:
		return fmt.Errorf("%w: killing a server needs at least 2 servers for its agents to move to", ErrConfig)
	case (c.FailoverCommand == "") != (c.FailoverAfter <= 0):
		return fmt.Errorf("%w: a failover needs both a command and a time", ErrConfig)
	case c.Out == "":
		return fmt.Errorf("%w: no output directory", ErrConfig)
	}
	if c.Hot <= 0 {
		c.Hot = 3
	}
	if c.Locks <= 0 {
		c.Locks = 4
	}
	return nil
}

func isServer(dsn string) bool {
	scheme, _, _ := strings.Cut(dsn, ":")
	switch strings.ToLower(scheme) {
	case "http", "https", "http+unix":
		return true
	}
	return false
}

// Mark is a moment of the run worth drawing: a server killed, a failover.
type Mark struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// run is a run under way.
type run struct {
	cfg     Config
	name    string
	start   time.Time
	ws      *workspace.Workspace // the coordinator's handle, on the store (or the server)
	mu      sync.Mutex
	recs    []Record
	marks   []Mark
	agentOK []bool
	acked   atomic.Int64
	cpu     []cpuSample
	fol     *follower
	logf    func(format string, args ...any)
}

type cpuSample struct {
	At   time.Time     `json:"at"`
	Busy time.Duration `json:"busy"`
	Tick time.Duration `json:"total"`
}

// Run plays the team, checks the invariants and writes the report to
// cfg.Out. Its error wraps ErrInvariant when an invariant failed (the
// report is written then too).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if err := os.MkdirAll(filepath.Join(cfg.Out, "agents"), 0o750); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, name: strconv.FormatInt(time.Now().Unix()%1e8, 36), logf: func(string, ...any) {}}
	if cfg.Progress != nil {
		r.logf = func(format string, args ...any) {
			fmt.Fprintf(cfg.Progress, "team %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
	opts := workspace.Options{Logger: slog.New(slog.DiscardHandler)}
	ws, err := workspace.Open(ctx, cfg.DSN, opts)
	if err != nil {
		return nil, fmt.Errorf("team: open %s: %w", workspace.RedactDSN(cfg.DSN), err)
	}
	defer ws.Close()
	r.ws = ws
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	dsns := []string{cfg.DSN}
	var servers []*exec.Cmd
	if cfg.Servers > 0 {
		var stop func()
		servers, dsns, stop, err = r.startServers(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	head0, err := ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	r.fol = newFollower(ws, head0)
	fctx, fcancel := context.WithCancel(ctx)
	folDone := make(chan struct{})
	go func() { defer close(folDone); r.fol.run(fctx) }()
	defer func() { fcancel(); <-folDone }()

	r.logf("run %s: starting %d agents on %d DSN(s), mix %s, think %v, log head %d", r.name, cfg.Agents, len(dsns), cfg.Mix, cfg.Think, head0)
	agents, err := r.startAgents(ctx, dsns)
	if err != nil {
		r.stopAgents(agents)
		return nil, err
	}
	// The clock starts once every agent has its handle open.
	ready := time.After(2 * time.Minute)
	for _, p := range agents {
		select {
		case <-p.ready:
		case <-ready:
		}
	}
	busy0, tick0, cpuOK := bench.MachineCPU()
	r.start = time.Now()
	if cpuOK {
		r.cpu = append(r.cpu, cpuSample{At: r.start, Busy: busy0, Tick: tick0})
	}
	r.logf("every agent is ready")
	r.drive(ctx, servers)
	stopAt := time.Now()
	// Stopped early (an interrupt) or not, the run is checked and reported.
	ctx = context.WithoutCancel(ctx)
	r.logf("stopping the agents")
	r.stopAgents(agents)
	end := time.Now()
	busy1, tick1, _ := bench.MachineCPU()
	head, err := r.finalHead(ctx)
	if err != nil {
		return nil, err
	}
	r.logf("waiting for the follower to reach the head %d", head)
	r.fol.waitFor(ctx, head, 2*time.Minute)
	fcancel()
	<-folDone
	r.logf("checking the invariants")
	rep := r.report(stopAt, head0, head)
	rep.DrainSeconds = end.Sub(stopAt).Seconds()
	if cpuOK {
		rep.setCPU(busy1-busy0, tick1-tick0)
	}
	rep.Invariants = r.check(ctx, head0, head)
	rep.OK = true
	for _, inv := range rep.Invariants {
		rep.OK = rep.OK && inv.OK
	}
	if err := rep.write(cfg.Out, r); err != nil {
		return rep, err
	}
	if !rep.OK {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.failed(), "; "))
	}
	return rep, nil
}

// setup creates what the agents contend on: the hot counters at 0 and the
// fenced artifacts.
func (r *run) setup(ctx context.Context) error {
	w := workspace.Write{Actor: "t" + r.name + "-coordinator"}
	for j := range r.cfg.Hot {
		if _, err := r.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: hotName(r.name, j), Kind: "output", Content: []byte("0"), ContentType: "text/plain"}); err != nil {
			return fmt.Errorf("team: setup: %w", err)
		}
	}
	for j := range r.cfg.Locks {
		if _, err := r.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: fencedName(r.name, j), Kind: "output", Content: []byte("none yet"), ContentType: "text/plain"}); err != nil {
			return fmt.Errorf("team: setup: %w", err)
		}
	}
	return nil
}

// startServers starts cfg.Servers servers on unix sockets in a fresh
// directory and waits until each answers.
func (r *run) startServers(ctx context.Context) ([]*exec.Cmd, []string, func(), error) {
	dir, err := os.MkdirTemp("", "wsteam") // a socket's path must fit in 108 bytes
	if err != nil {
		return nil, nil, nil, err
	}
	var cmds []*exec.Cmd
	var dsns []string
	stop := func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
		_ = os.RemoveAll(dir)
	}
	for i := range r.cfg.Servers {
		sock := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
		c := r.cfg.Serve(context.WithoutCancel(ctx), r.cfg.DSN, "unix:"+sock)
		logf, err := os.Create(filepath.Join(r.cfg.Out, fmt.Sprintf("server-%d.log", i)))
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		c.Stdout, c.Stderr = logf, logf
		if err := c.Start(); err != nil {
			_ = logf.Close()
			stop()
			return nil, nil, nil, fmt.Errorf("team: starting server %d: %w", i, err)
		}
		_ = logf.Close()
		cmds = append(cmds, c)
		dsns = append(dsns, "http+unix://"+sock)
		deadline := time.Now().Add(30 * time.Second)
		for {
			conn, err := net.Dial("unix", sock)
			if err == nil {
				_ = conn.Close()
				break
			}
			if time.Now().After(deadline) {
				stop()
				return nil, nil, nil, fmt.Errorf("team: server %d never listened on %s (see server-%d.log)", i, sock, i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return cmds, dsns, stop, nil
}

type agentProc struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	ready chan struct{} // closed at its first record (or its exit)
}

func (r *run) startAgents(ctx context.Context, dsns []string) ([]*agentProc, error) {
	var out []*agentProc
	r.agentOK = make([]bool, r.cfg.Agents)
	for id := range r.cfg.Agents {
		spec := AgentSpec{ID: id, Run: r.name, DSNs: rotated(dsns, id), Mix: r.cfg.Mix, Think: r.cfg.Think,
			Agents: r.cfg.Agents, Hot: r.cfg.Hot, Locks: r.cfg.Locks, Seed: r.cfg.Seed, OpTimeout: r.cfg.OpTimeout}
		c := r.cfg.Agent(context.WithoutCancel(ctx))
		stdin, err := c.StdinPipe()
		if err != nil {
			return out, err
		}
		stdout, err := c.StdoutPipe()
		if err != nil {
			return out, err
		}
		if c.Stderr == nil {
			c.Stderr = os.Stderr
		}
		if err := c.Start(); err != nil {
			return out, fmt.Errorf("team: starting agent %d: %w", id, err)
		}
		b, _ := json.Marshal(spec)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			return out, fmt.Errorf("team: agent %d: %w", id, err)
		}
		p := &agentProc{id: id, cmd: c, stdin: stdin, done: make(chan error, 1), ready: make(chan struct{})}
		out = append(out, p)
		go func() { p.done <- r.read(p, stdout) }()
	}
	return out, nil
}

func rotated(dsns []string, id int) []string {
	out := make([]string, 0, len(dsns))
	for i := range dsns {
		out = append(out, dsns[(id+i)%len(dsns)])
	}
	return out
}

// read collects an agent's records, copying them to agents/N.jsonl, and
// waits for it to exit.
func (r *run) read(p *agentProc, stdout io.Reader) error {
	f, err := os.Create(filepath.Join(r.cfg.Out, "agents", fmt.Sprintf("%d.jsonl", p.id)))
	if err != nil {
		_, _ = io.Copy(io.Discard, stdout)
		_ = p.cmd.Wait()
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var batch []Record
	var once sync.Once
	defer once.Do(func() { close(p.ready) })
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = w.Write(line)
		_ = w.WriteByte('\n')
		var rec Record
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if rec.Op == opReady {
			once.Do(func() { close(p.ready) })
			continue
		}
		if rec.Err == "" {
			r.acked.Add(1)
		}
		batch = append(batch, rec)
		if len(batch) >= 64 {
			r.mu.Lock()
			r.recs = append(r.recs, batch...)
			r.mu.Unlock()
			batch = batch[:0]
		}
	}
	r.mu.Lock()
	r.recs = append(r.recs, batch...)
	r.mu.Unlock()
	_ = w.Flush()
	err = p.cmd.Wait()
	if err == nil {
		r.mu.Lock()
		r.agentOK[p.id] = true
		r.mu.Unlock()
	}
	return err
}

// drive waits out the run, sampling the machine's CPU each second and
// killing a server or failing over when told to.
func (r *run) drive(ctx context.Context, servers []*exec.Cmd) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	killed, failed := false, false
	var failDone chan struct{}
	lastLog := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if busy, total, ok := bench.MachineCPU(); ok {
				r.mu.Lock()
				r.cpu = append(r.cpu, cpuSample{At: now, Busy: busy, Tick: total})
				r.mu.Unlock()
			}
			el := now.Sub(r.start)
			if !killed && r.cfg.KillServerAfter > 0 && el >= r.cfg.KillServerAfter && len(servers) > 0 {
				killed = true
				_ = servers[0].Process.Kill()
				r.mark("server 0 killed (SIGKILL)")
			}
			if !failed && r.cfg.FailoverAfter > 0 && el >= r.cfg.FailoverAfter {
				failed = true
				failDone = make(chan struct{})
				go func() {
					defer close(failDone)
					r.mark("failover command started")
					c := exec.Command("sh", "-c", r.cfg.FailoverCommand) // #nosec G204 -- the user's own --failover-command
					outp, err := c.CombinedOutput()
					_ = os.WriteFile(filepath.Join(r.cfg.Out, "failover.log"), outp, 0o600)
					if err != nil {
						r.mark("failover command failed: " + err.Error())
					} else {
						r.mark("failover command done")
					}
				}()
			}
			if now.Sub(lastLog) >= 10*time.Second {
				lastLog = now
				r.logf("%v: %d acknowledged ops, log +%d events", el.Round(time.Second), r.acked.Load(), r.fol.last.Load()-r.fol.from)
			}
			if r.cfg.Duration > 0 && el >= r.cfg.Duration {
				if failDone != nil {
					<-failDone
				}
				return
			}
			if r.cfg.Events > 0 && r.fol.last.Load()-r.fol.from >= r.cfg.Events {
				if failDone != nil {
					<-failDone
				}
				return
			}
		}
	}
}

func (r *run) mark(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks = append(r.marks, Mark{At: time.Now(), What: what})
	r.logf("%s", what)
}

// stopAgents closes every agent's stdin and waits for them (a minute,
// then kills the rest).
func (r *run) stopAgents(agents []*agentProc) {
	for _, p := range agents {
		_ = p.stdin.Close()
	}
	deadline := time.After(time.Minute)
	for _, p := range agents {
		select {
		case <-p.done:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// finalHead reads the log's head, retrying an unavailable store a while
// (a failover may just have happened).
func (r *run) finalHead(ctx context.Context) (int64, error) {
	var err error
	for range 60 {
		var h int64
		if h, err = r.ws.Events().Head(ctx); err == nil {
			return h, nil
		}
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("team: reading the log's head: %w", err)
}

func (r *run) check(ctx context.Context, head0, head int64) []Invariant {
	r.mu.Lock()
	recs, ok := r.recs, slices.Clone(r.agentOK)
	r.mu.Unlock()
	m := meta{Run: r.name, Agents: r.cfg.Agents, Hot: r.cfg.Hot, Locks: r.cfg.Locks, Head0: head0, Head: head}
	return checkAll(ctx, r.ws, m, recs, r.fol, ok)
}
