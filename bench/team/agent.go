package team

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// DefaultOpTimeout bounds one attempt of an operation unless
// AgentSpec.OpTimeout says otherwise.
const DefaultOpTimeout = 10 * time.Second

// RunAgent is an agent process: it reads its AgentSpec from the first line
// of stdin, plays its part until stdin closes (or ctx ends), and prints a
// Record per attempt to stdout. An operation under way when stdin closes
// is finished first; one that keeps meeting an unavailable store is given
// up and printed as unknown.
func RunAgent(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("agent: reading the spec: %w", err)
	}
	var spec AgentSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		return fmt.Errorf("agent: the spec: %w", err)
	}
	if len(spec.DSNs) == 0 || spec.Mix.sum() == 0 || spec.Agents < 1 || spec.Hot < 1 || spec.Locks < 1 {
		return fmt.Errorf("agent: the spec lacks DSNs, a mix, agents, hot counters or locks")
	}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(stop)
	}()
	out := bufio.NewWriter(stdout)
	a := &agent{
		spec: spec, actor: actor(spec.Run, spec.ID), stop: stop, out: json.NewEncoder(out), flush: out.Flush,
		timeout: cmp.Or(spec.OpTimeout, DefaultOpTimeout),
		rnd:     rand.New(rand.NewPCG(uint64(spec.Seed), uint64(spec.ID))), // #nosec G115 G404 -- seed bits (a wrap is as good); a reproducible workload's choices, no secret
		created: map[int]bool{},
	}
	defer a.close()
	// Ready once the handle is open: the run's clock starts when every
	// agent is.
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	err = a.open(octx)
	cancel()
	if err != nil {
		return fmt.Errorf("agent %d: open: %w", spec.ID, err)
	}
	now := time.Now().UnixNano()
	a.emit(Record{Op: opReady, Start: now, End: now})
	return a.run(ctx)
}

type agent struct {
	spec    AgentSpec
	actor   string
	stop    <-chan struct{}
	out     *json.Encoder
	flush   func() error
	rnd     *rand.Rand
	ws      *workspace.Workspace
	dsn     int // index into spec.DSNs
	timeout time.Duration
	created map[int]bool // own artifacts created
	n       int          // ops started
	class   string       // the error class of the last attempt that failed for good
	outErr  error
}

func (a *agent) close() {
	if a.ws != nil {
		_ = a.ws.Close()
	}
	_ = a.flush()
}

func (a *agent) stopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// open (re)opens the handle on the current DSN.
func (a *agent) open(ctx context.Context) error {
	if a.ws != nil {
		return nil
	}
	ws, err := workspace.Open(ctx, a.spec.DSNs[a.dsn], workspace.Options{Logger: slog.New(slog.DiscardHandler), MustExist: true})
	if err != nil {
		return err
	}
	a.ws = ws
	return nil
}

// rotate drops the handle and moves to the next DSN (another server),
// for the next attempt to open.
func (a *agent) rotate() {
	if len(a.spec.DSNs) < 2 {
		return
	}
	if a.ws != nil {
		_ = a.ws.Close()
		a.ws = nil
	}
	a.dsn = (a.dsn + 1) % len(a.spec.DSNs)
}

func (a *agent) run(ctx context.Context) error {
	sum := a.spec.Mix.sum()
	for !a.stopped() && ctx.Err() == nil {
		if a.spec.Think > 0 {
			d := time.Duration(a.rnd.Int64N(int64(2*a.spec.Think) + 1))
			select {
			case <-time.After(d):
			case <-a.stop:
				return a.outErr
			case <-ctx.Done():
				return a.outErr
			}
		}
		a.n++
		switch a.spec.Mix.pick(a.rnd.IntN(sum)) {
		case OpClaim:
			a.claim(ctx)
		case OpPut:
			a.put(ctx)
		case OpHot:
			a.hot(ctx)
		case OpLock:
			a.lock(ctx)
		case OpMsg:
			a.msg(ctx)
		case OpNote:
			a.note(ctx)
		}
		if a.outErr != nil {
			return a.outErr // stdout is gone: the coordinator is
		}
	}
	return a.outErr
}

func (a *agent) emit(r Record) {
	r.Agent = a.spec.ID
	if err := a.out.Encode(r); err == nil {
		err = a.flush()
		if err != nil {
			a.outErr = err
		}
	} else {
		a.outErr = err
	}
}

// classify names err's class, and whether the attempt may be repeated as
// is (its write, if any, carries an idempotency key or wrote nothing).
func classify(err error, remote bool) string {
	var ue *workspace.UnavailableError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, workspace.ErrConflict):
		return ErrClassConflict
	case errors.Is(err, workspace.ErrLocked):
		return ErrClassLocked
	case errors.Is(err, workspace.ErrNoTask):
		return ErrClassNoTask
	case errors.Is(err, workspace.ErrStaleFence), errors.Is(err, workspace.ErrLockLost):
		return ErrClassStale
	case errors.As(err, &ue) && ue.Unknown:
		return ErrClassUnknown
	case isNet(err):
		// A connection lost (a server died): the remote client gives its
		// transport's error once its own retries end, the last of which
		// may have been a refused dial after an earlier attempt reached
		// the server; the write may have committed.
		return ErrClassUnknown
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The attempt's time ran out (nothing else cancels it; the store
		// may report its own cancellation for it), perhaps after its
		// commit was sent.
		return ErrClassUnknown
	case errors.Is(err, workspace.ErrUnavailable), errors.Is(err, workspace.ErrClosed):
		if remote {
			// A server that died mid-request may have committed it.
			return ErrClassUnknown
		}
		return ErrClassUnavailable
	}
	return ErrClassError
}

// isNet reports whether err is a transport's (a lost connection).
func isNet(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func (a *agent) remote() bool {
	d := a.spec.DSNs[a.dsn]
	return strings.HasPrefix(d, "http:") || strings.HasPrefix(d, "https:") || strings.HasPrefix(d, "http+unix:")
}

// attempt runs fn until it succeeds or fails for good, printing a record
// per attempt. An unavailable store is retried (with backoff, on the next
// DSN) when retry says the attempt may be repeated: a write with an
// idempotency key is, a claim or an acquire is not (its outcome stays
// unknown). It returns the successful record (nil: none).
func (a *agent) attempt(op, key string, retry bool, fn func(ctx context.Context) (Record, error)) *Record {
	backoff := 20 * time.Millisecond
	unknown := false
	for {
		start := time.Now()
		var (
			r   Record
			err error
		)
		// As the agent: a server reads the actor from the request.
		ctx, cancel := context.WithTimeout(workspace.AsActor(context.Background(), a.actor), a.timeout)
		if err = a.open(ctx); err == nil {
			r, err = fn(ctx)
		}
		cancel()
		r.Op, r.Start, r.End = op, start.UnixNano(), time.Now().UnixNano()
		if r.Key == "" {
			r.Key = key
		}
		if err == nil {
			a.emit(r)
			return &r
		}
		r.Err = classify(err, a.remote())
		if r.Err == ErrClassError || r.Err == ErrClassUnknown || r.Err == ErrClassUnavailable || r.Err == ErrClassStale {
			r.Why = err.Error()
		}
		transient := r.Err == ErrClassUnavailable || r.Err == ErrClassUnknown
		unknown = unknown || r.Err == ErrClassUnknown
		if !transient || !retry || a.stopped() {
			if transient && unknown {
				r.Err = ErrClassUnknown // an earlier attempt's write may have committed
			}
			a.class = r.Err
			a.emit(r)
			return nil
		}
		// Retried under the same key: the next attempt's outcome is this one's.
		r.Err = ErrClassRetry
		a.emit(r)
		a.rotate()
		select {
		case <-time.After(backoff):
		case <-a.stop:
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (a *agent) write(key string) workspace.Write {
	return workspace.Write{Actor: a.actor, IdempotencyKey: key}
}

func (a *agent) claim(_ context.Context) {
	req := workspace.ClaimRequest{Actor: a.actor, Lease: 30 * time.Second, Labels: taskLabels(a.spec.Run)}
	var t workspace.Task
	got := a.attempt(OpClaim, "", false, func(ctx context.Context) (Record, error) {
		var err error
		t, err = a.ws.Tasks().Claim(ctx, req)
		return Record{Key: t.ID, Ver: t.Version}, err
	})
	if got == nil && a.class != ErrClassNoTask {
		return
	}
	if got == nil {
		// An empty pool: add one (the next claim takes from it).
		key := fmt.Sprintf("pool-%d", a.n)
		a.attempt("add", "", true, func(ctx context.Context) (Record, error) {
			b := workspace.Batch{Actor: a.actor, IdempotencyKey: key}
			for i := range 10 {
				b.Ops = append(b.Ops, workspace.CreateTaskOp{Task: workspace.NewTask{
					Title: fmt.Sprintf("a%d pool %d task %d", a.spec.ID, a.n, i), Labels: taskLabels(a.spec.Run), Priority: a.rnd.IntN(3),
				}})
			}
			res, err := a.ws.Commit(ctx, b)
			return Record{Val: int64(len(res.Results))}, err
		})
		return
	}
	a.attempt("done", t.ID, true, func(ctx context.Context) (Record, error) {
		d, err := a.ws.Tasks().Complete(ctx, a.write("done-"+t.ID), t.ID, workspace.TaskResult{Summary: "done by " + a.actor})
		return Record{Key: t.ID, Ver: d.Version}, err
	})
}

// content is a write's bytes: 256 of them, naming the writer and the op.
func (a *agent) content(what string) []byte {
	b := fmt.Appendf(nil, "%s %s op %d\n", a.actor, what, a.n)
	for len(b) < 256 {
		b = append(b, '.')
	}
	return b
}

func (a *agent) put(_ context.Context) {
	k := a.rnd.IntN(10)
	name := ownName(a.spec.Run, a.spec.ID, k)
	body := a.content(name)
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	key := fmt.Sprintf("put-%d", a.n)
	got := a.attempt(OpPut, name, true, func(ctx context.Context) (Record, error) {
		var (
			art workspace.Artifact
			err error
		)
		if !a.created[k] {
			art, err = a.ws.Artifacts().Create(ctx, a.write(key), workspace.NewArtifact{Name: name, Kind: "output", Content: body, ContentType: "text/plain"})
			if errors.Is(err, workspace.ErrAlreadyExists) {
				a.created[k] = true // a run before this agent's restart, or a lost answer
			}
		}
		if a.created[k] {
			art, err = a.ws.Artifacts().Update(ctx, a.write(key), workspace.ByName(name), workspace.ArtifactChange{Content: body})
		}
		return Record{Ver: art.Version, SHA: sha}, err
	})
	if got != nil {
		a.created[k] = true
	}
}

func (a *agent) hot(_ context.Context) {
	name := hotName(a.spec.Run, a.rnd.IntN(a.spec.Hot))
	for try := range 3 {
		key := fmt.Sprintf("hot-%d-%d", a.n, try)
		var conflict bool
		got := a.attempt(OpHot, name, true, func(ctx context.Context) (Record, error) {
			head, err := a.ws.Artifacts().Get(ctx, workspace.ByName(name))
			if err != nil {
				return Record{}, err
			}
			v, err := strconv.ParseInt(strings.TrimSpace(string(head.Content)), 10, 64)
			if err != nil {
				return Record{}, fmt.Errorf("hot counter %s holds %q: %w", name, head.Content, err)
			}
			w := a.write(key)
			w.IfVersion = head.Version
			art, err := a.ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(strconv.FormatInt(v+1, 10))})
			conflict = errors.Is(err, workspace.ErrConflict)
			return Record{Ver: art.Version, Val: v + 1}, err
		})
		if got != nil || !conflict || a.stopped() {
			return
		}
	}
}

func (a *agent) lock(_ context.Context) {
	name := fencedName(a.spec.Run, a.rnd.IntN(a.spec.Locks))
	res := workspace.ArtifactResource(name)
	var l workspace.Lease
	got := a.attempt(OpLock, res, false, func(ctx context.Context) (Record, error) {
		var err error
		l, err = a.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: res, Owner: a.actor, TTL: 10 * time.Second})
		return Record{Ver: l.Token}, err
	})
	if got == nil {
		return
	}
	key := fmt.Sprintf("fenced-%d", a.n)
	body := a.content(fmt.Sprintf("token %d", l.Token))
	a.attempt("fenced", name, true, func(ctx context.Context) (Record, error) {
		w := a.write(key)
		w.Fence = l.Token
		art, err := a.ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: body})
		return Record{Ver: art.Version, Val: l.Token}, err
	})
	// Hold it a moment, as work under a lease does.
	if a.spec.Think > 0 {
		time.Sleep(time.Duration(a.rnd.Int64N(int64(a.spec.Think)/2 + 1)))
	}
	a.attempt("unlock", res, true, func(ctx context.Context) (Record, error) {
		return Record{Ver: l.Token}, a.ws.Locks().Release(ctx, l)
	})
}

func (a *agent) msg(_ context.Context) {
	// The inbox first: acknowledge what is owed.
	var owed []workspace.Msg
	a.attempt("inbox", "", true, func(ctx context.Context) (Record, error) {
		p, err := a.ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: a.actor, Unacked: true, Limit: 50})
		owed = p.Messages
		return Record{Val: int64(len(p.Messages))}, err
	})
	for _, m := range owed {
		a.attempt("ack", m.ID, true, func(ctx context.Context) (Record, error) {
			res, err := a.ws.Commit(ctx, workspace.Batch{Actor: a.actor, IdempotencyKey: "ack-" + m.ID, Ops: []workspace.Op{workspace.AckMessageOp{ID: m.ID}}})
			var v int64
			if err == nil && len(res.Results) == 1 && res.Results[0].Msg != nil {
				v = res.Results[0].Msg.Version
			}
			return Record{Ver: v}, err
		})
	}
	if a.spec.Agents < 2 {
		return
	}
	to := a.rnd.IntN(a.spec.Agents - 1)
	if to >= a.spec.ID {
		to++
	}
	recipient := actor(a.spec.Run, to)
	key := fmt.Sprintf("msg-%d", a.n)
	a.attempt(OpMsg, "", true, func(ctx context.Context) (Record, error) {
		res, err := a.ws.Commit(ctx, workspace.Batch{Actor: a.actor, IdempotencyKey: key, Ops: []workspace.Op{workspace.SendMessageOp{Message: workspace.NewMsg{
			To: []string{recipient}, Subject: fmt.Sprintf("op %d", a.n), Body: "please look", RequiresAck: true,
		}}}})
		r := Record{To: recipient}
		if err == nil && len(res.Results) == 1 && res.Results[0].Msg != nil {
			r.Key, r.Ver = res.Results[0].Msg.ID, res.Results[0].Msg.Version
		}
		return r, err
	})
}

func (a *agent) note(_ context.Context) {
	k := a.rnd.IntN(20)
	nk := noteKey(a.spec.Run, a.spec.ID, k)
	key := fmt.Sprintf("note-%d", a.n)
	a.attempt(OpNote, noteKind+"/"+nk, true, func(ctx context.Context) (Record, error) {
		n, err := a.ws.Notes().Put(ctx, a.write(key), workspace.NotePut{Kind: noteKind, Key: nk, Title: "decided at op " + strconv.Itoa(a.n), Body: "because"})
		return Record{Ver: n.Version}, err
	})
}
