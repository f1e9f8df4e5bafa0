package team

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The operations of a team's mix, by the names --mix takes.
const (
	OpClaim = "claim" // claim a task of the run's pool (adding a pool when none is ready), then finish it
	OpPut   = "put"   // write one of the agent's own artifacts
	OpHot   = "hot"   // increment a hot counter artifact with compare-and-set (if_version)
	OpLock  = "lock"  // take a lease, write its artifact fenced by the token, release it
	OpMsg   = "msg"   // acknowledge what the inbox holds, then send a message that needs an ack
	OpNote  = "note"  // put one of the agent's notes
)

// mixOps are the operations a Mix weighs, in the order reports list them.
var mixOps = []string{OpClaim, OpPut, OpHot, OpLock, OpMsg, OpNote}

// DefaultMix is the mix --mix defaults to.
const DefaultMix = "claim=30,put=30,hot=15,lock=10,msg=10,note=5"

// ErrBadMix is the error of a mix ParseMix cannot read.
var ErrBadMix = errors.New("bad mix")

// Mix weighs the operations: each agent picks its next operation with
// probability weight/sum.
type Mix map[string]int

// ParseMix reads "op=weight,..." (weights are non-negative integers, at
// least one positive; an op left out weighs 0).
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	sum := 0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || !slices.Contains(mixOps, name) {
			return nil, fmt.Errorf("%w: %q is not op=weight with op one of %s", ErrBadMix, part, strings.Join(mixOps, ", "))
		}
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 || n > 1000000 {
			return nil, fmt.Errorf("%w: %q: the weight is not an integer between 0 and 1000000", ErrBadMix, part)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%w: %s given twice", ErrBadMix, name)
		}
		m[name] = n
		sum += n
	}
	if sum == 0 {
		return nil, fmt.Errorf("%w: %q weighs no operation", ErrBadMix, s)
	}
	return m, nil
}

// String is the mix as ParseMix reads it.
func (m Mix) String() string {
	var parts []string
	for _, op := range mixOps {
		if m[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", op, m[op]))
		}
	}
	return strings.Join(parts, ",")
}

// pick returns the op whose cumulative weight covers r, 0 <= r < sum.
func (m Mix) pick(r int) string {
	for _, op := range mixOps {
		if r < m[op] {
			return op
		}
		r -= m[op]
	}
	return OpNote
}

func (m Mix) sum() int {
	s := 0
	for _, op := range mixOps {
		s += m[op]
	}
	return s
}

// AgentSpec is what an agent process is told on its stdin, one JSON line.
type AgentSpec struct {
	ID     int           `json:"id"`
	Run    string        `json:"run"`  // the run's name: in every name, key, label and actor it writes
	DSNs   []string      `json:"dsns"` // where to open the workspace; on unavailable, the next (servers)
	Mix    Mix           `json:"mix"`
	Think  time.Duration `json:"think"` // mean pause between ops (uniform in [0, 2*Think])
	Agents int           `json:"agents"`
	Hot    int           `json:"hot"`   // hot counters
	Locks  int           `json:"locks"` // fenced artifacts under leases
	Seed   int64         `json:"seed"`
	// OpTimeout bounds one attempt (default DefaultOpTimeout): one that
	// runs out is an unknown outcome, tried again as is where it may be.
	OpTimeout time.Duration `json:"op_timeout,omitempty"`
}

// Record is one line an agent prints: an operation's attempt, acknowledged
// (Err empty) or not (Err its class).
type Record struct {
	Agent int    `json:"a"`
	Op    string `json:"op"`            // claim, done, add, put, hot, lock, fenced, unlock, msg, ack, note
	Key   string `json:"k,omitempty"`   // the record: artifact name, task or message id, lock resource, note kind/key
	Ver   int64  `json:"v,omitempty"`   // the version written, or the lease's token
	Val   int64  `json:"n,omitempty"`   // hot: the counter's new value; fenced: the token; add: tasks added
	SHA   string `json:"sha,omitempty"` // put: the content's SHA-256
	To    string `json:"to,omitempty"`  // msg: the recipient
	Start int64  `json:"s"`             // unix nanoseconds
	End   int64  `json:"e"`
	Err   string `json:"err,omitempty"` // the class: conflict, locked, notask, unavailable, unknown, stale, error
	Why   string `json:"why,omitempty"` // the error's text, for the classes worth reading
}

// Error classes of Record.Err.
const (
	ErrClassConflict    = "conflict"    // ErrConflict: a compare-and-set lost (hot), expected under contention
	ErrClassLocked      = "locked"      // ErrLocked: the lease is another's, expected under contention
	ErrClassNoTask      = "notask"      // ErrNoTask: the pool is empty (a pool is added next)
	ErrClassUnavailable = "unavailable" // ErrUnavailable, nothing written: retried
	ErrClassUnknown     = "unknown"     // the write may or may not have committed
	ErrClassStale       = "stale"       // ErrStaleFence / ErrLockLost
	ErrClassError       = "error"       // anything else: a failure
	ErrClassRetry       = "retry"       // unavailable, and tried again as is: the next record of the op says how it ended
)

// actor is agent id's name in run.
func actor(run string, id int) string { return fmt.Sprintf("t%s-a%d", run, id) }

// Names the run writes.
func ownName(run string, id, k int) string    { return fmt.Sprintf("team/%s/a%d/f%d", run, id, k) }
func hotName(run string, j int) string        { return fmt.Sprintf("team/%s/hot/h%d", run, j) }
func fencedName(run string, j int) string     { return fmt.Sprintf("team/%s/fenced/l%d", run, j) }
func noteKey(run string, id, k int) string    { return fmt.Sprintf("t%s-a%d-%d", run, id, k) }
func taskLabels(run string) map[string]string { return map[string]string{"team": run} }

// opReady is the record an agent prints once its handle is open, before
// its first operation.
const opReady = "ready"

// noteKind is the kind of the notes agents put.
const noteKind = "decision"
