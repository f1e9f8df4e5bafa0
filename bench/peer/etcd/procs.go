package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentspace/agentspace/bench"
)

// etcdChildEnv makes this program one etcd client process of the
// many-processes row: its value is "ENDPOINT ID START_UNIX_NANO DURATION_NS".
const etcdChildEnv = "AGENTSPACE_PEER_ETCD_CLIENT"

// etcdChildResult is what an etcd client process reports on stdout.
type etcdChildResult struct {
	Ops int64 `json:"ops"`
}

// etcdClient is one client process: its own clientv3 client, W1's CAS put
// plus event key at c=1, counted from the shared start for the duration.
func etcdClient(spec string) error {
	var (
		endpoint string
		id       int
		start    int64
		d        time.Duration
	)
	if _, err := fmt.Sscan(spec, &endpoint, &id, &start, &d); err != nil {
		return fmt.Errorf("etcd client: bad spec %q: %w", spec, err)
	}
	ctx := context.Background()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	value := string(make([]byte, 1024))
	key := fmt.Sprintf("w1/proc/%d", id)
	resp, err := cl.Put(ctx, key, value)
	if err != nil {
		return err
	}
	rev := resp.Header.Revision
	t0 := time.Unix(0, start)
	time.Sleep(time.Until(t0))
	end := t0.Add(d)
	var ops int64
	for n := 0; time.Now().Before(end); n++ {
		tr, err := cl.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, value), clientv3.OpPut(fmt.Sprintf("events/proc/%d/%d", id, n), key)).Commit()
		if err != nil {
			return err
		}
		if !tr.Succeeded {
			return fmt.Errorf("etcd: CAS on %s lost at revision %d", key, rev)
		}
		rev = tr.Header.Revision
		ops++
	}
	return json.NewEncoder(os.Stdout).Encode(etcdChildResult{Ops: ops})
}

// etcdProcesses runs W1 from n client processes at c=1 each against the
// etcd at endpoint, started together: the shape of n agents on one host,
// each its own client. It reports the rate, etcd's CPU per op (this
// process embeds it) and the clients' CPU per op.
func etcdProcesses(ctx context.Context, endpoint string, n int, d time.Duration) (row, error) {
	self, err := os.Executable()
	if err != nil {
		return row{}, err
	}
	// The children dial and write their key first; measuring starts
	// together, late enough for them all to be ready on a loaded machine.
	start := time.Now().Add(3 * time.Second)
	cmds := make([]*exec.Cmd, n)
	outs := make([][]byte, n)
	errs := make(chan error, n)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, self) // #nosec G204 -- this very program
		cmd.Env = append(os.Environ(), etcdChildEnv+"="+fmt.Sprintf("%s %d %d %d", endpoint, i, start.UnixNano(), int64(d)))
		cmd.Stderr = os.Stderr
		cmds[i] = cmd
	}
	cpu0 := selfCPU()
	for i, cmd := range cmds {
		go func() {
			out, err := cmd.Output()
			outs[i] = out
			errs <- err
		}()
	}
	// The machine's CPU over the window the children measure: etcd's,
	// the clients' and whatever else runs, as our rows count it.
	time.Sleep(time.Until(start))
	b0, t0, ok0 := bench.MachineCPU()
	time.Sleep(d)
	b1, t1, ok1 := bench.MachineCPU()
	for range cmds {
		if err := <-errs; err != nil {
			return row{}, fmt.Errorf("etcd client process: %w", err)
		}
	}
	server := selfCPU() - cpu0
	var ops int64
	var clients time.Duration
	for i, cmd := range cmds {
		var r etcdChildResult
		if err := json.Unmarshal(outs[i], &r); err != nil {
			return row{}, fmt.Errorf("etcd client process %d: %w", i, err)
		}
		ops += r.Ops
		clients += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if ops == 0 {
		return row{}, fmt.Errorf("etcd client processes did no op")
	}
	perOp := func(t time.Duration) float64 { return float64(t.Microseconds()) / float64(ops) }
	r := row{system: "etcd", workload: fmt.Sprintf("CAS put + event key, %d processes", n), c: n, ops: float64(ops) / d.Seconds(), p50: -1, p99: -1, fsyncs: -1,
		note: fmt.Sprintf("each its own client at c=1; etcd's CPU per op %.0fµs (with the clients' start-up), the clients' %.0fµs", perOp(server), perOp(clients))}
	if ok0 && ok1 && t1 > t0 {
		r.machine = perOp(b1 - b0)
		r.note += "; " + bench.MachineNote(r.machine, float64(b1-b0)/float64(t1-t0))
	}
	return r, nil
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
