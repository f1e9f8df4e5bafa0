// Command etcd measures the peer issue 7 compares agentspace with, embedded
// etcd (one node, fsync on), on this machine, next to our own W1, W4 and W6
// rows from the bench package, in one run.
//
// It is a module of its own, so that etcd and its dependencies stay out of
// agentspace's go.mod:
//
//	cd bench/peer/etcd
//	go run . --sqlite /tmp/peer --pg 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable&ws_schema=peer'
//
// etcd's data directory is made under --dir (default: the system temp
// directory), which should be on the disk our stores use.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"

	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/bench"
)

func main() {
	var (
		duration = flag.Duration("duration", 3*time.Second, "how long each row measures")
		dir      = flag.String("dir", os.TempDir(), "where etcd's data directory is made")
		sqliteAt = flag.String("sqlite", "", "directory for our SQLite store (empty: skip)")
		pgDSN    = flag.String("pg", "", "our Postgres DSN, with its own ws_schema (empty: skip)")
		rounds   = flag.Int("rounds", 2, "how many times etcd and ours alternate")
		procs    = flag.Int("processes", 0, "also run W1 from this many processes at c=1 each: etcd's each its own client, ours through one server's unix socket (0: skip)")
	)
	if spec := os.Getenv(etcdChildEnv); spec != "" {
		if err := etcdClient(spec); err != nil {
			log.Fatal(err)
		}
		return
	}
	if os.Getenv(childEnv) == "1" {
		// This program re-executed as the bench's child process.
		if err := bench.ServeChild(context.Background(), os.Stdin, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	flag.Parse()
	ctx := context.Background()
	var (
		rows     []row
		brackets []bracket
	)
	for r := range *rounds {
		log.Printf("round %d: etcd", r+1)
		er, err := measureEtcd(ctx, *dir, *duration, *procs)
		if err != nil {
			log.Fatal(err)
		}
		rows = append(rows, er...)
		for _, dsn := range ours(*sqliteAt, *pgDSN, r) {
			log.Printf("round %d: %s", r+1, dsn)
			rows = append(rows, measureOurs(ctx, dsn, *duration)...)
			if *procs > 0 {
				b, bracketRows, err := measureBracketed(ctx, *dir, dsn, *duration, *procs)
				if err != nil {
					log.Fatal(err)
				}
				b.round = r + 1
				rows = append(rows, bracketRows...)
				brackets = append(brackets, b)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tWORKLOAD\tC\tOPS/S\tP50\tP99\tFSYNCS/OP\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\n", r.system, r.workload, r.c, r.ops,
			us(r.p50), us(r.p99), perOp(r.fsyncs), r.note)
	}
	_ = tw.Flush()
	printBrackets(os.Stdout, brackets, *procs)
}

type row struct {
	system, workload, note string
	c                      int
	ops, p50, p99, fsyncs  float64 // latencies in µs; fsyncs < 0: not known
	// machine is a many-processes row's CPU per op, every process of the
	// machine counted, in µs (0: not read).
	machine float64
}

// bracket is one of our many-processes rows between two of etcd's, run
// just before and just after it: a shared VM's speed can drift over the
// minute a round takes, and a ratio to an etcd row measured a minute
// earlier says as much about the drift as about either system. The
// ratio is ours over the mean of the two.
type bracket struct {
	round         int
	system        string
	before, after float64 // etcd's machine CPU per op, µs
	ours          float64
}

// measureBracketed runs our many-processes row on dsn between two runs of
// etcd's, each on a fresh etcd started for it.
func measureBracketed(ctx context.Context, dir, dsn string, d time.Duration, n int) (bracket, []row, error) {
	var b bracket
	before, err := etcdProcessesAlone(ctx, dir, d, n)
	if err != nil {
		return b, nil, err
	}
	served := measureServed(ctx, dsn, d, n)
	after, err := etcdProcessesAlone(ctx, dir, d, n)
	if err != nil {
		return b, nil, err
	}
	before.workload += " (before ours)"
	after.workload += " (after ours)"
	b.before, b.after = before.machine, after.machine
	for _, r := range served {
		if strings.HasPrefix(r.workload, "W1 via") && r.machine > 0 {
			b.system, b.ours = r.system, r.machine
		}
	}
	return b, append(append([]row{before}, served...), after), nil
}

// printBrackets prints each bracketed row's figures and ratio.
func printBrackets(w io.Writer, bs []bracket, n int) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nW1 from %d processes, the machine's CPU per op, each of ours between two runs of etcd's:\n", n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUND\tSYSTEM\tETCD BEFORE\tOURS\tETCD AFTER\tOURS / ETCD")
	for _, b := range bs {
		ratio := "-"
		if b.before > 0 && b.after > 0 && b.ours > 0 {
			ratio = fmt.Sprintf("%.2fx", b.ours/((b.before+b.after)/2))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", b.round, b.system, us(b.before), us(b.ours), us(b.after), ratio)
	}
	_ = tw.Flush()
}

func us(v float64) string {
	if v < 0 {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.2fms", v/1000)
	}
	return fmt.Sprintf("%.0fµs", v)
}

func perOp(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// ours returns the DSNs of our stores for round r (a fresh SQLite file each).
func ours(sqliteAt, pgDSN string, r int) []string {
	var out []string
	if sqliteAt != "" {
		d := filepath.Join(sqliteAt, fmt.Sprintf("round%d", r))
		if err := os.MkdirAll(d, 0o700); err != nil {
			log.Fatal(err)
		}
		out = append(out, "sqlite:"+filepath.Join(d, "ws.db"))
	}
	if pgDSN != "" {
		out = append(out, pgDSN)
	}
	return out
}

// measureOurs runs our W1 (4 private handles, and shared: one process's
// handles on one store), the W4 hand-over and W6 resume through the bench
// package.
func measureOurs(ctx context.Context, dsn string, d time.Duration) []row {
	var out []row
	run := func(cfg bench.Config, label string) {
		cfg.DSN, cfg.Duration = dsn, d
		rs, err := bench.RunAll(ctx, cfg, nil)
		if err != nil {
			log.Fatalf("%s: %v", label, err)
		}
		for _, r := range rs {
			if r.Variant != "" && r.Variant != "handover other handle" && r.Variant != "resume" {
				continue
			}
			w := r.Workload
			if r.Variant != "" {
				w += " " + r.Variant
			}
			fs := -1.0
			if r.Workload == "W1" {
				fs = r.CommitsPerOp
			}
			out = append(out, row{system: r.Backend, workload: w, c: r.Concurrency, ops: r.OpsPerSec,
				p50: r.P50us, p99: r.P99us, fsyncs: fs, note: fmt.Sprintf("%s; raw %.0f/s, %.2fx", label, r.RawOpsPerSec, r.Ratio)})
		}
	}
	run(bench.Config{Workloads: []string{"W1"}, Concurrency: []int{1, 16}}, "4 private handles")
	run(bench.Config{Workloads: []string{"W1"}, Concurrency: []int{1, 16}, Shared: true}, "4 shared handles")
	run(bench.Config{Workloads: []string{"W4", "W6"}, Concurrency: []int{1}}, "")
	for i := range out {
		if out[i].note == "; raw 0/s, 0.00x" {
			out[i].note = ""
		}
	}
	return out
}

// childEnv makes this program the bench's child process when set.
const childEnv = "AGENTSPACE_PEER_BENCH_CHILD"

// child re-executes this program as the bench's child process.
func child(ctx context.Context) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self) // #nosec G204 -- this very program
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// measureServed runs our W1 from n processes at c=1 each through one
// server's unix socket in front of dsn's store (the bench's --serve unix
// --processes n): n agents on one host sharing the server's group commit.
func measureServed(ctx context.Context, dsn string, d time.Duration, n int) []row {
	cfg := bench.Config{DSN: dsn, Duration: d, Workloads: []string{"W1"}, Concurrency: []int{n}, Serve: []string{"unix"}, Processes: n, Child: child}
	rs, err := bench.RunAll(ctx, cfg, nil)
	if err != nil {
		log.Fatalf("served: %v", err)
	}
	var out []row
	for _, r := range rs {
		if !strings.Contains(r.Variant, "processes") {
			continue
		}
		if r.Workload == "HTTP" {
			// The same children's requests to a bare server that stores
			// nothing: the transport's ceiling on this machine.
			out = append(out, row{system: "-", workload: "HTTP " + r.Variant, c: r.Concurrency, ops: r.OpsPerSec,
				p50: r.P50us, p99: r.P99us, note: fmt.Sprintf("no store: the ceiling of %d client processes; served row %.2fx of it%s", n, r.Ratio, machineNote(r))})
			continue
		}
		out = append(out, row{system: r.Backend, workload: "W1 " + r.Variant, c: r.Concurrency, ops: r.OpsPerSec,
			p50: r.P50us, p99: r.P99us, fsyncs: r.CommitsPerOp, note: fmt.Sprintf("%.2fx W1 c=%d in process%s", r.Ratio, n, machineNote(r)),
			machine: r.MachineCPUusPerOp})
	}
	return out
}

// machineNote is the machine's CPU per op of a many-processes row, as
// etcd's row says it, or "" where it was not read.
func machineNote(r bench.Row) string {
	if r.MachineCPUusPerOp == 0 {
		return ""
	}
	if r.ClientCPUusPerOp > 0 {
		return "; " + bench.MachineSplitNote(r)
	}
	return "; " + bench.MachineNote(r.MachineCPUusPerOp, r.MachineBusy)
}

// freePort returns a loopback port nobody listens on now.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// measureEtcd starts a fresh one-node etcd and measures it.
func measureEtcd(ctx context.Context, parent string, d time.Duration, procs int) ([]row, error) {
	client, stop, err := startEtcd(parent)
	if err != nil {
		return nil, err
	}
	defer stop()
	clients := make([]*clientv3.Client, 4)
	for i := range clients {
		if clients[i], err = clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second}); err != nil {
			return nil, err
		}
		defer clients[i].Close()
	}
	var out []row
	for _, c := range []int{1, 16} {
		r, err := casPut(ctx, clients, c, d)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if procs > 0 {
		r, err := etcdProcesses(ctx, client.String(), procs, d)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	r, err := handOver(ctx, clients, d)
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	r, err = watchResume(ctx, clients[0], d)
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

// startEtcd starts a one-node embedded etcd with its data in a fresh
// directory under parent and returns its client URL and what stops it
// (and removes the directory).
func startEtcd(parent string) (url.URL, func(), error) {
	dir, err := os.MkdirTemp(parent, "etcd-peer-")
	if err != nil {
		return url.URL{}, nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort())}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort())}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return url.URL{}, nil, err
	}
	stop := func() {
		e.Close()
		_ = os.RemoveAll(dir)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		stop()
		return url.URL{}, nil, fmt.Errorf("etcd did not start")
	}
	return client, stop, nil
}

// etcdProcessesAlone is etcd's many-processes row on an etcd started for
// it alone.
func etcdProcessesAlone(ctx context.Context, parent string, d time.Duration, n int) (row, error) {
	client, stop, err := startEtcd(parent)
	if err != nil {
		return row{}, err
	}
	defer stop()
	return etcdProcesses(ctx, client.String(), n, d)
}

// fsyncs reads etcd's own count of WAL fsyncs.
func fsyncs() float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_disk_wal_fsync_duration_seconds" {
			var n float64
			for _, m := range mf.GetMetric() {
				n += float64(m.GetHistogram().GetSampleCount())
			}
			return n
		}
	}
	return 0
}

// percentiles returns p50 and p99 of ds in µs.
func percentiles(ds []time.Duration) (float64, float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) }
	return at(0.50), at(0.99)
}

// casPut: c goroutines over the clients, each a compare-and-swap put of
// 1 KiB on its own key plus the put of an event key, in one txn: our W1.
func casPut(ctx context.Context, clients []*clientv3.Client, c int, d time.Duration) (row, error) {
	value := string(make([]byte, 1024))
	var (
		mu   sync.Mutex
		lats []time.Duration
		ops  atomic.Int64
		errs = make(chan error, c)
		wg   sync.WaitGroup
	)
	f0 := fsyncs()
	t0 := time.Now()
	deadline := t0.Add(d)
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[w%len(clients)]
			key := fmt.Sprintf("w1/c%d/%d", c, w)
			resp, err := cl.Put(ctx, key, value)
			if err != nil {
				errs <- err
				return
			}
			rev := resp.Header.Revision
			var mine []time.Duration
			for n := 0; time.Now().Before(deadline); n++ {
				s := time.Now()
				tr, err := cl.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
					Then(clientv3.OpPut(key, value), clientv3.OpPut(fmt.Sprintf("events/c%d/%d/%d", c, w, n), key)).Commit()
				if err != nil {
					errs <- err
					return
				}
				if !tr.Succeeded {
					errs <- fmt.Errorf("etcd: CAS on %s lost at revision %d", key, rev)
					return
				}
				mine = append(mine, time.Since(s))
				rev = tr.Header.Revision
				ops.Add(1)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return row{}, err
	}
	el := time.Since(t0).Seconds()
	n := float64(ops.Load())
	p50, p99 := percentiles(lats)
	return row{system: "etcd", workload: "CAS put + event key", c: c, ops: n / el, p50: p50, p99: p99,
		fsyncs: (fsyncs() - f0) / n, note: fmt.Sprintf("%d clients", min(c, len(clients)))}, nil
}

// handOver: a holder releases a contended mutex; the time until the
// waiter, on another client and session, holds it: our W4 hand-over.
func handOver(ctx context.Context, clients []*clientv3.Client, d time.Duration) (row, error) {
	s1, err := concurrency.NewSession(clients[0], concurrency.WithTTL(60))
	if err != nil {
		return row{}, err
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(clients[1], concurrency.WithTTL(60))
	if err != nil {
		return row{}, err
	}
	defer s2.Close()
	holder, waiter := concurrency.NewMutex(s1, "/peer/lock"), concurrency.NewMutex(s2, "/peer/lock")
	var lats []time.Duration
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := holder.Lock(ctx); err != nil {
			return row{}, err
		}
		acquired := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			if err := waiter.Lock(ctx); err != nil {
				errc <- err
				return
			}
			acquired <- time.Now()
		}()
		time.Sleep(5 * time.Millisecond) // the waiter is queued behind the holder
		released := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			return row{}, err
		}
		select {
		case at := <-acquired:
			lats = append(lats, at.Sub(released))
		case err := <-errc:
			return row{}, err
		}
		if err := waiter.Unlock(ctx); err != nil {
			return row{}, err
		}
	}
	p50, p99 := percentiles(lats)
	return row{system: "etcd", workload: "lock hand-over", c: 1, ops: float64(len(lats)) / d.Seconds(), p50: p50, p99: p99,
		fsyncs: -1, note: "release -> waiter (other client, other session) holds it"}, nil
}

// watchResume: Watch from a revision 1000 puts back; the time until the
// first backlog event arrives: our W6 resume.
func watchResume(ctx context.Context, cl *clientv3.Client, d time.Duration) (row, error) {
	var first int64
	for i := range 1000 {
		resp, err := cl.Put(ctx, fmt.Sprintf("resume/%d", i), "x")
		if err != nil {
			return row{}, err
		}
		if i == 0 {
			first = resp.Header.Revision
		}
	}
	var lats []time.Duration
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		wctx, cancel := context.WithCancel(ctx)
		t0 := time.Now()
		wc := cl.Watch(wctx, "resume/", clientv3.WithPrefix(), clientv3.WithRev(first))
		resp := <-wc
		lat := time.Since(t0)
		cancel()
		if err := resp.Err(); err != nil {
			return row{}, err
		}
		if len(resp.Events) == 0 {
			return row{}, fmt.Errorf("etcd: a resumed watch delivered no event")
		}
		lats = append(lats, lat)
	}
	p50, p99 := percentiles(lats)
	return row{system: "etcd", workload: "watch resume", c: 1, ops: float64(len(lats)) / d.Seconds(), p50: p50, p99: p99,
		fsyncs: -1, note: "Watch from 1000 revisions back -> first event"}, nil
}
