package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// The linearizability test: clients over several handles, and in child
// processes, run a random mix of artifact reads and IfVersion writes, lock
// acquire/release/get, and task claim/release on a small key space, recording when each call started and
// returned and what it returned. Porcupine then searches for a sequential
// order, consistent with real time, in which every outcome is what the
// sequential model (linModel) says it must be. The history is partitioned by
// key: each artifact, each lock resource, and the task pool is checked alone.

const (
	linHandles        = 4
	linClients        = 8 // goroutines, over linHandles handles
	linProcesses      = 2
	linClientsPerProc = 2
	roleLinClient     = "lin-client"
	linOpsPerClient   = 50
	linTasks          = 24
	linCheckTimeout   = 2 * time.Minute
	linArtifactStart  = "init"
	linKeyTasks       = "tasks"
)

var (
	linArtifacts = []string{"lin/a0", "lin/a1"}
	linLocks     = []string{"lin:l0", "lin:l1"}
)

// linInput is one call: which key, what operation, with what arguments.
type linInput struct {
	Key       string
	Op        string // read, write, acquire, release, getlock, claim, unclaim
	Actor     string
	IfVersion int64
	Content   string
	Token     int64
	TaskID    string
}

// linOutput is what the call returned. Err names the error class ("" for
// success): conflict, locked, notfound, notask, lost, notholder.
type linOutput struct {
	Err     string
	Version int64 // artifact version read or written; the current one for conflicts
	Content string
	Holder  string
	Token   int64
	TaskID  string
}

// linState is the state of one partition. Every field is comparable so
// that porcupine's default == can tell states apart; a partition uses only
// its kind's fields.
type linState struct {
	Version int64
	Content string
	Holder  string
	Token   int64
	Pending string // pending task ids in claim order, comma-separated
	Claimed string // "id=actor" of in_progress tasks, sorted, comma-separated
}

// linModel is the sequential specification the history must match.
// order gives each task's rank in claim order (priority, then id).
func linModel(initialPending []string, order map[string]int) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(linInput).Key
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any {
			return linState{Version: 1, Content: linArtifactStart, Pending: strings.Join(initialPending, ",")}
		},
		Step: func(state, input, output any) (bool, any) {
			return linStep(state.(linState), input.(linInput), output.(linOutput), order)
		},
		DescribeOperation: func(input, output any) string {
			return describeLinOp(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(linState)) },
	}
}

func linStep(s linState, in linInput, out linOutput, order map[string]int) (bool, any) {
	switch in.Op {
	case "read":
		return out.Err == "" && out.Version == s.Version && out.Content == s.Content, s
	case "write":
		if in.IfVersion != 0 && in.IfVersion != s.Version {
			return out.Err == "conflict" && out.Version == s.Version, s
		}
		n := s
		n.Version, n.Content = s.Version+1, in.Content
		return out.Err == "" && out.Version == n.Version, n
	case "acquire":
		switch s.Holder {
		case "":
			n := s
			n.Holder, n.Token = in.Actor, s.Token+1
			return out.Err == "" && out.Token == n.Token, n
		case in.Actor:
			return out.Err == "" && out.Token == s.Token, s
		default:
			return out.Err == "locked" && out.Holder == s.Holder && out.Token == s.Token, s
		}
	case "release":
		switch {
		case s.Token > in.Token, s.Token == in.Token && s.Holder == "":
			return out.Err == "lost", s
		case s.Token != in.Token || s.Holder != in.Actor:
			return out.Err == "notholder", s
		}
		n := s
		n.Holder = ""
		return out.Err == "", n
	case "getlock":
		if s.Holder == "" {
			return out.Err == "notfound", s
		}
		return out.Err == "" && out.Holder == s.Holder && out.Token == s.Token, s
	case "claim":
		pending := splitList(s.Pending)
		if len(pending) == 0 {
			return out.Err == "notask", s
		}
		if out.Err != "" || out.TaskID != pending[0] {
			return false, s
		}
		n := s
		n.Pending = strings.Join(pending[1:], ",")
		n.Claimed = joinSorted(append(splitList(s.Claimed), pending[0]+"="+in.Actor))
		return true, n
	case "unclaim":
		claimed := splitList(s.Claimed)
		i := slices.Index(claimed, in.TaskID+"="+in.Actor)
		if i < 0 {
			return out.Err != "", s
		}
		if out.Err != "" {
			return false, s
		}
		n := s
		n.Claimed = strings.Join(slices.Delete(claimed, i, i+1), ",")
		pending := append(splitList(s.Pending), in.TaskID)
		sort.Slice(pending, func(a, b int) bool { return order[pending[a]] < order[pending[b]] })
		n.Pending = strings.Join(pending, ",")
		return true, n
	}
	return false, s
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func joinSorted(xs []string) string {
	sort.Strings(xs)
	return strings.Join(xs, ",")
}

func describeLinOp(in linInput, out linOutput) string {
	var call string
	switch in.Op {
	case "read":
		call = fmt.Sprintf("read(%s)", in.Key)
	case "write":
		call = fmt.Sprintf("write(%s, ifVersion=%d, %q)", in.Key, in.IfVersion, in.Content)
	case "acquire":
		call = fmt.Sprintf("acquire(%s, %s)", in.Key, in.Actor)
	case "release":
		call = fmt.Sprintf("release(%s, %s, token=%d)", in.Key, in.Actor, in.Token)
	case "getlock":
		call = fmt.Sprintf("getlock(%s)", in.Key)
	case "claim":
		call = fmt.Sprintf("claim(%s)", in.Actor)
	case "unclaim":
		call = fmt.Sprintf("release-task(%s, %s)", in.TaskID, in.Actor)
	}
	if out.Err != "" {
		return fmt.Sprintf("%s -> %s (version %d, holder %q, token %d)", call, out.Err, out.Version, out.Holder, out.Token)
	}
	return fmt.Sprintf("%s -> ok (version %d, content %q, holder %q, token %d, task %s)",
		call, out.Version, out.Content, out.Holder, out.Token, out.TaskID)
}

// linErrClass maps an outcome the model knows to its class; any other error
// is not part of the semantics under test and fails the run.
func linErrClass(err error) (string, bool) {
	switch {
	case err == nil:
		return "", true
	case errors.Is(err, workspace.ErrConflict):
		return "conflict", true
	case errors.Is(err, workspace.ErrLocked):
		return "locked", true
	case errors.Is(err, workspace.ErrNotFound):
		return "notfound", true
	case errors.Is(err, workspace.ErrNoTask):
		return "notask", true
	case errors.Is(err, workspace.ErrLockLost):
		return "lost", true
	case errors.Is(err, workspace.ErrNotHolder):
		return "notholder", true
	}
	return "", false
}

// linClient is one client's view: what it last saw and holds, to pick
// calls that mostly make sense (and sometimes do not, on purpose).
type linClient struct {
	id      int
	actor   string
	ws      *workspace.Workspace
	rng     *rand.Rand
	seen    map[string]int64 // artifact -> last version seen
	tokens  map[string]int64 // lock -> token it was granted
	claimed []string         // task ids it claimed
}

// testLinearizable records a concurrent history on one store and checks it.
func testLinearizable(t *testing.T, h Harness) {
	ctx := caseCtx(t, 3*time.Minute)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, linHandles)
	setup := workspace.Write{Actor: "setup"}
	for _, name := range linArtifacts {
		_, err := hs[0].Artifacts().Create(ctx, setup, workspace.NewArtifact{Name: name, Content: []byte(linArtifactStart)})
		require.NoError(t, err)
	}
	ops := make([]workspace.Op, linTasks)
	for i := range ops {
		ops[i] = workspace.CreateTaskOp{Task: workspace.NewTask{Title: fmt.Sprintf("lin %d", i), Priority: i % 3}}
	}
	res, err := hs[0].Commit(ctx, workspace.Batch{Actor: "setup", Ops: ops})
	require.NoError(t, err)
	tasks := make([]workspace.Task, len(res.Results))
	for i, r := range res.Results {
		tasks[i] = *r.Task
	}
	// Claim order: highest priority first, then oldest (lowest id).
	sort.Slice(tasks, func(a, b int) bool {
		if tasks[a].Priority != tasks[b].Priority {
			return tasks[a].Priority > tasks[b].Priority
		}
		return tasks[a].ID < tasks[b].ID
	})
	order := map[string]int{}
	pending := make([]string, len(tasks))
	for i, task := range tasks {
		order[task.ID] = i
		pending[i] = task.ID
	}

	seed := time.Now().UnixNano()
	t.Logf("linearizability seed %d", seed)
	// Child processes run clients of their own; everyone stamps calls with
	// the wall clock, which all processes on this host share.
	kids := make([]*relKid, linProcesses)
	for p := range kids {
		first := linClients + p*linClientsPerProc
		kids[p] = startRelChild(t, ctx, subtestPattern(t), roleLinClient, fmt.Sprintf("lin-%d", p), dsn,
			fmt.Sprintf("%d,%d", seed, first), 2*time.Minute)
	}
	for _, k := range kids {
		k.expect(t, ctx, "ready")
	}
	start := time.Now()
	for _, k := range kids {
		k.send(t, "go")
	}
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for i := range linClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := runLinClient(ctx, hs[i%linHandles], i, seed)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			history = append(history, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, k := range kids {
		for {
			line := k.next(t, ctx)
			if line == "done" {
				break
			}
			rest, ok := strings.CutPrefix(line, "op ")
			require.True(t, ok, "child %s said %q\n%s", k.name, line, k.describe())
			var rec linRecord
			require.NoError(t, json.Unmarshal([]byte(rest), &rec))
			history = append(history, porcupine.Operation{ClientId: rec.Client, Input: rec.In, Call: rec.Call, Output: rec.Out, Return: rec.Return})
		}
		k.wait(t, ctx)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d operations by %d clients (%d in %d processes) in %s", len(history), linClients+linProcesses*linClientsPerProc,
		linProcesses*linClientsPerProc, linProcesses, time.Since(start).Round(time.Millisecond))
	checkStart := time.Now()
	checkLinearizable(t, linModel(pending, order), history)
	t.Logf("checked in %s", time.Since(checkStart).Round(time.Millisecond))
}

// linRecord is one operation as a child process reports it.
type linRecord struct {
	Client       int
	In           linInput
	Out          linOutput
	Call, Return int64
}

// runLinClient runs client id's calls on ws and returns its history,
// stamped with the wall clock in nanoseconds. An error outside the model
// ends it early.
func runLinClient(ctx context.Context, ws *workspace.Workspace, id int, seed int64) ([]porcupine.Operation, error) {
	c := &linClient{
		id: id, actor: fmt.Sprintf("client-%d", id), ws: ws,
		rng:  rand.New(rand.NewPCG(uint64(seed), uint64(id))), // #nosec G404 G115 -- seeded test randomness; small non-negative numbers
		seen: map[string]int64{}, tokens: map[string]int64{},
	}
	var mine []porcupine.Operation
	for n := range linOpsPerClient {
		in := c.next(n)
		call := time.Now().UnixNano()
		out, err := c.do(ctx, in)
		ret := time.Now().UnixNano()
		if err != nil {
			return mine, fmt.Errorf("client %d op %d %s: unexpected error: %w", c.id, n, describeLinOp(in, linOutput{}), err)
		}
		mine = append(mine, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	}
	return mine, nil
}

// linClientChild runs linClientsPerProc clients on one handle once told
// "go", and prints every operation as a JSON line, then "done".
func linClientChild(t *testing.T, dsn, arg string, in *bufio.Scanner, say func(string, ...any)) {
	seedS, firstS, _ := strings.Cut(arg, ",")
	seed, err := strconv.ParseInt(seedS, 10, 64)
	require.NoError(t, err)
	first, err := strconv.Atoi(firstS)
	require.NoError(t, err)
	ctx := testCtx(t)
	ws := open(t, dsn)
	say("ready")
	cmd, err := readLine(in)
	require.NoError(t, err)
	require.Equal(t, "go", cmd)
	var (
		mu  sync.Mutex
		all []porcupine.Operation
		wg  sync.WaitGroup
	)
	for i := range linClientsPerProc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := runLinClient(ctx, ws, first+i, seed)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, op := range all {
		b, err := json.Marshal(linRecord{Client: op.ClientId, In: op.Input.(linInput), Out: op.Output.(linOutput), Call: op.Call, Return: op.Return})
		require.NoError(t, err)
		say("op %s", b)
	}
	say("done")
}

// next picks the client's n-th call.
func (c *linClient) next(n int) linInput {
	in := linInput{Actor: c.actor}
	switch r := c.rng.IntN(100); {
	case r < 25:
		in.Key, in.Op = linArtifacts[c.rng.IntN(len(linArtifacts))], "read"
	case r < 50:
		in.Key, in.Op = linArtifacts[c.rng.IntN(len(linArtifacts))], "write"
		in.Content = fmt.Sprintf("c%d-%d", c.id, n)
		in.IfVersion = c.seen[in.Key]
		if in.IfVersion == 0 {
			in.IfVersion = 1
		}
		if c.rng.IntN(10) == 0 {
			in.IfVersion = 0 // an unconditional write now and then
		}
	case r < 70:
		in.Key = linLocks[c.rng.IntN(len(linLocks))]
		if tok, ok := c.tokens[in.Key]; ok && c.rng.IntN(3) > 0 {
			in.Op, in.Token = "release", tok
		} else {
			in.Op = "acquire"
		}
	case r < 75:
		in.Key, in.Op = linLocks[c.rng.IntN(len(linLocks))], "getlock"
	default:
		in.Key = linKeyTasks
		if len(c.claimed) > 0 && c.rng.IntN(2) == 0 {
			in.Op, in.TaskID = "unclaim", c.claimed[c.rng.IntN(len(c.claimed))]
		} else {
			in.Op = "claim"
		}
	}
	return in
}

// do runs the call and turns its outcome into a linOutput. The error it
// returns is one outside the model.
func (c *linClient) do(ctx context.Context, in linInput) (linOutput, error) {
	var (
		out linOutput
		err error
	)
	w := workspace.Write{Actor: c.actor, IfVersion: in.IfVersion}
	switch in.Op {
	case "read":
		var a workspace.Artifact
		a, err = c.ws.Artifacts().Get(ctx, workspace.ByName(in.Key))
		out.Version, out.Content = a.Version, string(a.Content)
		if err == nil {
			c.seen[in.Key] = a.Version
		}
	case "write":
		var a workspace.Artifact
		a, err = c.ws.Artifacts().Update(ctx, w, workspace.ByName(in.Key), workspace.ArtifactChange{Content: []byte(in.Content)})
		out.Version = a.Version
		if ce, ok := asConflict(err); ok {
			out.Version = ce.Current
		}
		c.seen[in.Key] = out.Version
	case "acquire":
		var l workspace.Lease
		l, err = c.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: in.Key, Owner: c.actor, TTL: 10 * time.Minute})
		out.Token = l.Token
		var le *workspace.LockedError
		if errors.As(err, &le) {
			out.Holder, out.Token = le.Holder, le.Token
		}
		if err == nil {
			c.tokens[in.Key] = l.Token
		}
	case "release":
		err = c.ws.Locks().Release(ctx, workspace.Lease{Resource: in.Key, Owner: c.actor, Token: in.Token})
		delete(c.tokens, in.Key)
	case "getlock":
		var l workspace.Lease
		l, err = c.ws.Locks().Get(ctx, in.Key)
		out.Holder, out.Token = l.Owner, l.Token
	case "claim":
		var task workspace.Task
		task, err = c.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: c.actor, Lease: 10 * time.Minute})
		out.TaskID = task.ID
		if err == nil {
			c.claimed = append(c.claimed, task.ID)
		}
	case "unclaim":
		_, err = c.ws.Tasks().Release(ctx, workspace.Write{Actor: c.actor}, in.TaskID)
		if i := slices.Index(c.claimed, in.TaskID); i >= 0 {
			c.claimed = slices.Delete(c.claimed, i, i+1)
		}
	}
	class, known := linErrClass(err)
	if !known {
		return out, err
	}
	out.Err = class
	return out, nil
}

// checkLinearizable checks history partition by partition and, for a
// partition that fails, prints its operations in call order with the
// longest prefix that could be linearized, and writes porcupine's
// visualization to a file.
func checkLinearizable(t *testing.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	for _, part := range model.Partition(history) {
		key := part[0].Input.(linInput).Key
		res, info := porcupine.CheckOperationsVerbose(model, part, linCheckTimeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			t.Errorf("key %s: the checker gave up on %d operations after %s", key, len(part), linCheckTimeout)
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "key %s: history of %d operations is not linearizable\n", key, len(part))
		sorted := slices.Clone(part)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
		for _, op := range sorted {
			fmt.Fprintf(&b, "  [%9d, %9d] client %d: %s\n", op.Call/1000, op.Return/1000, op.ClientId,
				describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
		}
		var longest []porcupine.Operation
		for _, p := range info.PartialLinearizationsOperations() {
			for _, seq := range p {
				if len(seq) > len(longest) {
					longest = seq
				}
			}
		}
		fmt.Fprintf(&b, "longest linearizable prefix (%d operations), after which no pending operation fits:\n", len(longest))
		for _, op := range longest {
			fmt.Fprintf(&b, "  client %d: %s\n", op.ClientId, describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
		}
		path := filepath.Join(os.TempDir(), fmt.Sprintf("agentspace-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(model, info, path); err == nil {
			fmt.Fprintf(&b, "visualization: %s\n", path)
		}
		t.Error(b.String())
	}
}
