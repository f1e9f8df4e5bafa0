package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Enforcement of the workspace's policy (workspace.PolicyArtifact).
//
// Every operation is checked against the core's cached policy, confirmed
// by a read of the policy's head (its own snapshot, outside the
// operation's transaction) at most Options.PolicyRecheck (default 100ms) before the operation
// began; a commit of the core's own that touches the policy makes the next
// operation read it again. So:
//
//	an operation is checked against a policy that was in force no earlier
//	than Options.PolicyRecheck before it began; after a handle's own policy
//	change, its next operation is checked against that change or a newer.
//
// Reading the head inside each write's transaction would bind a change at
// once on every host, but costs every write a read (a round trip on
// PostgreSQL, where it also defeats the predicted single-writer path)
// even with no policy at all. The compiled policy is cached by the
// artifact's ID and version: it is parsed once per version per core.

// policyCache is a core's compiled policy.
type policyCache struct {
	mu      sync.Mutex
	id      string // the artifact compiled; "" for no policy
	version int64
	pol     *policy.Policy // nil: no policy, everything allowed
	bad     error          // the stored policy does not parse
	checked time.Time      // when the read that confirmed it began
	// stale is when the core last committed a change to the policy: a
	// read that began before it may have missed the change.
	stale time.Time
	// reads counts the reads of the head, joins the operations that
	// waited for another's (for tests).
	reads, joins atomic.Int64
	// reading is the read of the head in flight, if any. An operation
	// that finds the cache too old waits for it instead of reading the
	// head too, when it began late enough to confirm the policy for that
	// operation: so the writers that find the cache expired together
	// (all of them, under load) cost one read, not one each. A shared read
	// that failed in the store fails its waiters too.
	reading *flight[policyAnswer]
}

// policyAnswer is what a read of the policy's head gives: the policy,
// and bad when the stored policy does not parse.
type policyAnswer struct {
	pol *policy.Policy
	bad error
}

// join returns the read in flight if it began after since and after the
// core's last change to the policy, so that its answer confirms the
// policy as fresh would; otherwise it records a read starting at start as
// the one in flight and returns it with own set.
func (c *policyCache) join(since, start time.Time) (r *flight[policyAnswer], own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.reading; r != nil && r.start.After(since) && r.start.After(c.stale) {
		return r, false
	}
	r = newFlight[policyAnswer](start)
	c.reading = r
	return r, true
}

// current returns the policy for the head (id, version) read by a
// snapshot taken at or after when, compiling content (read by load) only
// for a version not seen before.
func (c *policyCache) current(id string, version int64, when time.Time, load func() ([]byte, error)) (*policy.Policy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != c.id || version != c.version {
		src := []byte(nil)
		if id != "" {
			var err error
			if src, err = load(); err != nil {
				return nil, err
			}
		}
		c.id, c.version, c.pol, c.bad = id, version, nil, nil
		if id != "" {
			c.pol, c.bad = policy.Parse(src)
		}
	}
	if when.After(c.checked) && when.After(c.stale) {
		c.checked = when
	}
	return c.pol, c.bad
}

// fresh returns the cached policy if it was confirmed after since and
// after the core's last change to it.
func (c *policyCache) fresh(since time.Time) (pol *policy.Policy, bad error, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked.IsZero() || c.checked.Before(since) || !c.checked.After(c.stale) {
		return nil, nil, false
	}
	return c.pol, c.bad, true
}

// changed records that the core committed a change to the policy.
func (c *policyCache) changed() {
	c.mu.Lock()
	c.stale = time.Now()
	c.mu.Unlock()
}

// policyIn reads the policy head in tx.
func (c *core) policyIn(ctx context.Context, tx driver.ReadTx, when time.Time) (*policy.Policy, error) {
	head, err := tx.Artifact(ctx, workspace.ByName(workspace.PolicyArtifact))
	if errors.Is(err, workspace.ErrNotFound) {
		return c.policy.current("", 0, when, nil)
	}
	if err != nil {
		return nil, err
	}
	return c.policy.current(head.ID, head.Version, when, func() ([]byte, error) {
		return tx.Content(ctx, head.ID, head.Version, head.SHA256)
	})
}

// readPolicy returns the policy an operation starting now is checked
// against; bad is set when the stored policy does not parse.
func (h *handle) readPolicy(ctx context.Context) (pol *policy.Policy, bad error, err error) {
	if err := h.alive(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	// Its cost is one read of the policy's head per period per core,
	// whatever the load; a negative period reads it for every operation.
	if h.opts.PolicyRecheck <= 0 {
		return h.readPolicyHead(ctx, start)
	}
	since := start.Add(-h.opts.PolicyRecheck)
	if pol, bad, ok := h.policy.fresh(since); ok {
		return pol, bad, nil
	}
	r, own := h.policy.join(since, start)
	if !own {
		h.policy.joins.Add(1)
		a, err, again := r.wait(ctx, "policy")
		if again {
			return h.readPolicyHead(ctx, start)
		}
		return a.pol, a.bad, err
	}
	// A read that failed because its caller gave up, or because its
	// handle closed (the cache is the core's, shared with open handles),
	// says nothing of the store.
	a, err := r.fly(ctx, h, &h.policy.mu, &h.policy.reading, func() (policyAnswer, error) {
		pol, bad, err := h.readPolicyHead(ctx, start)
		return policyAnswer{pol, bad}, err
	}, errPolicyReadAborted)
	return a.pol, a.bad, err
}

// errPolicyReadAborted answers the operations that waited for a read of
// the policy that panicked.
var errPolicyReadAborted = errors.New("policy: the read of the policy this operation waited for was aborted")

// readPolicyHead reads the policy's head in a snapshot of its own, taken
// after start.
func (h *handle) readPolicyHead(ctx context.Context, start time.Time) (pol *policy.Policy, bad error, err error) {
	h.policy.reads.Add(1)
	err = h.storeView(ctx, nil, func(tx driver.ReadTx) error {
		var err error
		pol, err = h.policyIn(ctx, tx, start)
		var pe *policy.Error
		if errors.As(err, &pe) {
			bad, err = err, nil
		}
		return err
	})
	if errors.Is(err, workspace.ErrUnavailable) || errors.Is(err, workspace.ErrClosed) {
		// Reading the policy only met the outage, or the handle's
		// close, first: the caller names its operation.
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, wrapErr("policy", err)
	}
	return pol, bad, nil
}

// who is the identity an operation is checked for, and the policy.
type who struct {
	actor string
	roles []string // nil: the policy's roles of actor
	set   bool     // a principal was given (reads without one are unchecked)
	bound bool     // the principal was verified (a server's token)
	// pins says the caller's context carries a key reserved with Pins
	// (reserve.GrantedPins): its ops' Pin is the system's bookkeeping.
	// It is read from the caller's context, not the group's.
	pins bool
	pol  *policy.Policy
	bad  error
}

// none reports whether nothing is to be checked: no policy.
func (w who) none() bool { return w.pol == nil && w.bad == nil }

// who returns the identity of an operation by actor (a write's; "" for a
// read), from the principal ctx carries, with the policy to check.
func (h *handle) who(ctx context.Context, actor string) (who, error) {
	p, ok := wsconn.PrincipalFrom(ctx)
	w := who{actor: actor, set: ok, pins: reserve.GrantedPins(ctx)}
	if err := impersonation(p, actor); err != nil {
		return w, err
	}
	if ok {
		if actor == "" {
			w.actor = p.Actor
		}
		w.roles, w.bound = p.Roles, p.Bound
	}
	var err error
	w.pol, w.bad, err = h.readPolicy(ctx)
	return w, err
}

// ownName reports whether name is actor's own: actor itself, or actor
// followed by "#" and a suffix, one process's name of the actor's (the
// merge queue's lease owner "merger#PID-…"). A token of actor's writes as
// any of them, and a stop of actor ends what any of them holds.
func ownName(name, actor string) bool {
	return name == actor || strings.HasPrefix(name, actor+"#")
}

// impersonation refuses a write whose actor is not its bound principal's:
// behind a server the principal comes from a token, and a token acts only
// as its own actor (or one of its own names, ownName), whatever face the
// write came through. Nothing is written, not even a denied event. An
// unbound principal (in process, the actor is self-declared) binds nothing.
func impersonation(p workspace.Principal, actor string) error {
	if !p.Bound || actor == "" || ownName(actor, p.Actor) {
		return nil
	}
	return &workspace.ForbiddenError{Actor: p.Actor, Roles: p.Roles, Action: "act-as", Object: actor,
		Reason: fmt.Sprintf("the caller acts as %q; a write cannot name another actor", p.Actor)}
}

// decide checks one action; a refusal is a *ForbiddenError. A policy
// that no longer parses (stored by an import, or by a store edited by
// hand) refuses everything but a fix of the policy itself.
func (w who) decide(a policy.Action, object string) error {
	if w.bad != nil {
		if a == policy.AdminPolicy {
			return nil
		}
		return &workspace.ForbiddenError{Actor: w.actor, Action: string(a), Object: object, Rule: policy.RuleKey(a),
			Reason: fmt.Sprintf("the stored policy is invalid; fix %s first (%v)", workspace.PolicyArtifact, w.bad)}
	}
	if w.pol == nil {
		return nil
	}
	roles := w.roles
	if roles == nil {
		roles = w.pol.RolesOf(w.actor)
	}
	d := w.pol.Check(roles, a, object)
	if d.Allowed {
		return nil
	}
	return &workspace.ForbiddenError{Actor: w.actor, Roles: roles, Action: string(a), Object: object, Rule: d.Rule, Reason: d.Reason()}
}

// allowRead checks a read of object for ctx's principal; reads without a
// principal are not checked. A refusal is recorded as a denied event.
func (h *handle) allowRead(ctx context.Context, a policy.Action, object string, subj workspace.Subject) error {
	if _, ok := wsconn.PrincipalFrom(ctx); !ok {
		return nil
	}
	w, err := h.who(ctx, "")
	if err != nil || w.none() {
		return err
	}
	if err := w.decide(a, object); err != nil {
		var fe *workspace.ForbiddenError
		if errors.As(err, &fe) {
			h.recordDenied(ctx, fe, subj)
		}
		return err
	}
	return nil
}

// readFilter returns a predicate for listings: what ctx's principal may
// read. It is nil when nothing is filtered.
func (h *handle) readFilter(ctx context.Context) (func(a policy.Action, object string) bool, error) {
	if _, ok := wsconn.PrincipalFrom(ctx); !ok {
		return nil, nil
	}
	w, err := h.who(ctx, "")
	if err != nil || w.none() {
		return nil, err
	}
	return func(a policy.Action, object string) bool { return w.decide(a, object) == nil }, nil
}

// allowAdmin checks an administration right of ctx's principal; a call
// without a principal is not checked (the caller opened the store). A
// refusal is recorded.
func (h *handle) allowAdmin(ctx context.Context, a policy.Action) error {
	if _, ok := wsconn.PrincipalFrom(ctx); !ok {
		return nil
	}
	w, err := h.who(ctx, "")
	if err != nil {
		return err
	}
	if err := w.decide(a, ""); err != nil {
		var fe *workspace.ForbiddenError
		if errors.As(err, &fe) {
			h.recordDenied(ctx, fe, workspace.Subject{})
		}
		return err
	}
	return nil
}

// noteAction is the action and object a note of kind needs: a reserved
// kind's own right if it names one (the server's tokens need the admin
// "tokens" right), else the note rights on the kind.
func noteAction(write bool, kind string) (policy.Action, string) {
	if e, ok := reserve.Lookup(kind); ok && e.Right != "" {
		return policy.Action(e.Right), ""
	}
	switch {
	case write:
		return policy.NoteWrite, kind
	}
	return policy.NoteRead, kind
}

// artifactAction is the action and object a write of artifact name needs.
func artifactAction(a policy.Action, name string) (policy.Action, string) {
	if name == workspace.PolicyArtifact {
		return policy.AdminPolicy, ""
	}
	return a, name
}

// artifactReadable reports whether name may be read under allow: the
// policy itself is readable by everyone, so that agents can see their rights.
func artifactReadable(allow func(policy.Action, string) bool, name string) bool {
	return allow == nil || name == workspace.PolicyArtifact || allow(policy.ArtifactRead, name)
}

// authorize checks a write job's ops inside its transaction (reading the
// records they name there), all of them before any is applied, so that a
// refused batch has written nothing. It returns the index of the op
// refused, with its error.
func (x *exec) authorize(ctx context.Context, w who, ops []workspace.Op) (int, error) {
	for i, op := range ops {
		if !w.none() {
			if err := x.authorizeOp(ctx, w, op, i == 0); err != nil {
				return i, err
			}
		} else if err := x.ungoverned(ctx, w, op); err != nil {
			return i, err
		}
		// With no policy, only a first policy's content is checked.
		if err := x.checkPolicyWrite(ctx, w, op); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// ungoverned checks op where no policy governs, which allows every write
// but an operator's (opEntry.operator) by a bound principal without the
// built-in admin role: without a policy, a server's token may stop an
// agent only if its role is admin, as the dashboard lets only such a token
// act. An unbound caller (in process, the CLI on its own store) is trusted
// as its host is. A refusal is recorded as a denied event.
func (x *exec) ungoverned(ctx context.Context, w who, op workspace.Op) error {
	if !w.bound || slices.Contains(w.roles, policy.AdminRole) {
		return nil
	}
	s, err := specOf(op)
	if err != nil || !s.operator {
		return err
	}
	a, object, subj, err := s.action(ctx, x, w, op, false)
	if err != nil {
		return err
	}
	if object == "" {
		object = subj.Name
	}
	fe := &workspace.ForbiddenError{Actor: w.actor, Roles: w.roles, Action: string(a), Object: object,
		Reason: "the workspace has no policy, so only a token whose role is admin may do this (wsctl token create --role admin)"}
	x.denied(fe, subj)
	return fe
}

// allow checks one action of a write inside its transaction: a batch op's
// (authorizeOp), or that of a write that is not a batch op (a claim, a
// lease). A refusal is kept for the job's denied event.
func (x *exec) allow(w who, a policy.Action, object string, subj workspace.Subject) error {
	if err := w.decide(a, object); err != nil {
		x.denied(err, subj)
		return err
	}
	return nil
}

// denied keeps the refusal for the job, whose failure records it.
func (x *exec) denied(err error, subj workspace.Subject) {
	var fe *workspace.ForbiddenError
	if errors.As(err, &fe) && x.refused != nil {
		*x.refused = refusal{err: fe, subject: subj}
	}
}

// authorizeOp checks what op needs (its op table entry's action) and, for
// an op that also pins the version it writes, what that pin needs
// (pinNeeds). An op on a record that does not exist needs nothing here: it
// fails on its own. first says op is the batch's first, which may keep the
// task it reads.
func (x *exec) authorizeOp(ctx context.Context, w who, op workspace.Op, first bool) error {
	s, err := specOf(op)
	if err != nil {
		return err
	}
	a, object, subj, err := s.action(ctx, x, w, op, first)
	if err != nil {
		return err
	}
	if a != "" {
		if err := x.allow(w, a, object, subj); err != nil {
			return err
		}
	}
	if s.pins(op) {
		if a, object, psubj := pinNeeds(w, subj); a != "" {
			return x.allow(w, a, object, psubj)
		}
	}
	return nil
}

// pinNeeds is what an op's Pin needs beside the write of its artifact
// (subj, empty when the artifact does not exist): the note rights on the
// pin kind, which Workspace.Pin's put of the same note needs (noteAction:
// the rule's one home), unless the batch pins as the system's bookkeeping
// (a key reserved with Pins, which only the layer that reserved it holds).
// The reserved-kind check does not apply: an op's Pin is one of the pin
// kind's owners.
func pinNeeds(w who, subj workspace.Subject) (policy.Action, string, workspace.Subject) {
	if w.pins || subj.Name == "" {
		return "", "", workspace.Subject{}
	}
	a, obj := noteAction(true, workspace.PinKind)
	// The pin's key (ID@VERSION) is not known before the write: the
	// refusal names the artifact the pin was for.
	return a, obj, workspace.Subject{Kind: "note", Name: workspace.PinKind + "/" + subj.Name}
}

// artifactNeeds is what a write of the artifact ref names needs: a (or the
// admin "policy" right for the policy itself).
func (x *exec) artifactNeeds(ctx context.Context, ref workspace.ArtifactRef, a policy.Action) (policy.Action, string, workspace.Subject, error) {
	name := ref.Name
	if name == "" {
		head, err := x.tx.Artifact(ctx, workspace.ArtifactRef{ID: ref.ID})
		if errors.Is(err, workspace.ErrNotFound) {
			return "", "", workspace.Subject{}, nil
		}
		if err != nil {
			return "", "", workspace.Subject{}, err
		}
		name = head.Name
	}
	act, obj := artifactAction(a, name)
	return act, obj, workspace.Subject{Kind: "artifact", ID: ref.ID, Name: name}, nil
}

// taskUpdateNeeds is what an update of task o.ID needs: another's task
// needs "others", finishing one's own "finish".
func (x *exec) taskUpdateNeeds(ctx context.Context, w who, o workspace.UpdateTaskOp, first bool) (policy.Action, string, workspace.Subject, error) {
	t, err := x.tx.Task(ctx, o.ID)
	if errors.Is(err, workspace.ErrNotFound) {
		return "", "", workspace.Subject{}, nil
	}
	if err != nil {
		return "", "", workspace.Subject{}, err
	}
	if first {
		x.authTask = &t
	}
	subj := workspace.Subject{Kind: "task", ID: t.ID, Name: t.Title}
	own := t.Assignee == w.actor || (t.Assignee == "" && t.CreatedBy == w.actor)
	switch {
	case !own:
		return policy.TaskOthers, t.ID, subj, nil
	case o.Change.Status != nil && (*o.Change.Status == workspace.TaskDone || *o.Change.Status == workspace.TaskFailed):
		return policy.TaskFinish, t.ID, subj, nil
	}
	return "", "", workspace.Subject{}, nil
}

// noteNeeds is what a write of note kind/key needs.
func noteNeeds(kind, key string) (policy.Action, string, workspace.Subject, error) {
	a, obj := noteAction(true, kind)
	return a, obj, workspace.Subject{Kind: "note", Name: kind + "/" + key}, nil
}

// checkPolicyWrite refuses a new version of the policy that does not parse,
// or that would take the admin "policy" right from its own author. The op
// table's policySource says which ops can write one.
func (x *exec) checkPolicyWrite(ctx context.Context, w who, op workspace.Op) error {
	s, err := specOf(op)
	if err != nil || s.policySource == nil {
		return err
	}
	src, ok, err := s.policySource(ctx, x, op)
	if err != nil || !ok {
		return err
	}
	pol, err := policy.Parse(src)
	if err != nil {
		return &workspace.InvalidError{Field: "policy", Reason: err.Error()}
	}
	after := w
	after.pol, after.bad = pol, nil
	if after.decide(policy.AdminPolicy, "") != nil {
		return &workspace.InvalidError{Field: "policy", Reason: fmt.Sprintf("it would take the admin \"policy\" right from its author %q, who could then not change it back", w.actor)}
	}
	return nil
}

// rollbackPolicySource is the content a rollback of the policy would make
// its head; ok is false when the rollback will fail on its own.
func (x *exec) rollbackPolicySource(ctx context.Context, o workspace.RollbackArtifactOp) ([]byte, bool, error) {
	if !x.isPolicy(o.Ref) {
		return nil, false, nil
	}
	head, err := x.tx.Artifact(ctx, workspace.ByName(workspace.PolicyArtifact))
	if err != nil {
		return nil, false, nil // the rollback fails on its own
	}
	old, err := x.tx.ArtifactVersion(ctx, head.ID, o.To)
	if err != nil {
		return nil, false, nil
	}
	src, err := x.tx.Content(ctx, old.ID, old.Version, old.SHA256)
	return src, err == nil, err
}

// isPolicy reports whether ref names the policy artifact.
//
// A reference by ID is matched against the ID of the policy the core's
// cache last confirmed, not read in the transaction: reading it there cost
// every update by ID a round trip on PostgreSQL, policy or none. The cache
// is as fresh as the policy the write is checked against
// (Options.PolicyRecheck), so only a policy created or re-created by another
// handle within that bound escapes this content check; the policy is then
// still checked when it is next read, and one that does not parse refuses
// everything but its own fix.
func (x *exec) isPolicy(ref workspace.ArtifactRef) bool {
	if ref.Name != "" {
		return ref.Name == workspace.PolicyArtifact
	}
	c := &x.h.policy
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id != "" && ref.ID == c.id
}

// refusal is a job's denied operation, recorded by the committer as a
// denied event when the job fails.
type refusal struct {
	err     *workspace.ForbiddenError
	subject workspace.Subject
}

// deniedEvent is the event that records a refusal. Its subject is of kind
// "policy", its ID the action and its Name the record's name, not the
// record's own subject: a denied event changes no record, and stores that
// re-read the record an event names (json) must not look for one that may
// not exist.
func deniedEvent(actor string, now time.Time, r refusal) workspace.Event {
	name := r.subject.Name
	if name == "" {
		name = r.err.Object
	}
	subj := workspace.Subject{Kind: workspace.SubjectPolicy, ID: r.err.Action, Name: name}
	return workspace.Event{Time: now, Actor: actor, Type: workspace.EventDenied, Subject: subj,
		Message: fmt.Sprintf("%s: %s", r.err.Action, r.err.Reason)}
}

// recordDenied appends the denied event of a refused read or of a write
// whose transaction was rolled back, in its own transaction. It is best
// effort: the caller already has its error.
func (c *core) recordDenied(ctx context.Context, fe *workspace.ForbiddenError, subj workspace.Subject) {
	ctx = context.WithoutCancel(ctx)
	var ev workspace.Event
	err := c.st.Update(ctx, func(tx driver.Tx) error {
		ev = deniedEvent(fe.Actor, tx.Now(), refusal{err: fe, subject: subj})
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev})
		ev.Seq = first
		return err
	})
	if err != nil {
		c.opts.Logger.Warn("agentspace: recording a denied event failed", "err", err)
		return
	}
	c.hub.publish([]workspace.Event{ev})
}

// touchesPolicy reports whether a committed batch may have changed the
// policy: an op named it, wrote it, or deleted an artifact by ID.
func touchesPolicy(ops []workspace.Op, res workspace.BatchResult) bool {
	for _, r := range res.Results {
		if r.Artifact != nil && r.Artifact.Name == workspace.PolicyArtifact {
			return true
		}
	}
	for _, op := range ops {
		if o, ok := op.(workspace.DeleteArtifactOp); ok && (o.Ref.Name == workspace.PolicyArtifact || o.Ref.Name == "") {
			return true
		}
	}
	return false
}

// allowArtifactRead checks a direct read of artifact name (the policy is
// readable by everyone).
func (h *handle) allowArtifactRead(ctx context.Context, name, id string) error {
	if name == workspace.PolicyArtifact {
		return nil
	}
	return h.allowRead(ctx, policy.ArtifactRead, name, workspace.Subject{Kind: "artifact", ID: id, Name: name})
}

// eventFilter returns a predicate for events: those ctx's principal may
// read. It is nil when nothing is filtered (no principal, no policy).
//
// An event about an artifact needs artifact.read on its name (the policy's
// own events are readable by everyone), one about a note note.read on its
// kind (admin "tokens" for the server's tokens), and a denied event the
// same read right on the record it names. Task and lock events pass: the
// policy has no read right on tasks or locks.
func (h *handle) eventFilter(ctx context.Context) (func(workspace.Event) bool, error) {
	allow, err := h.readFilter(ctx)
	if allow == nil || err != nil {
		return nil, err
	}
	return func(e workspace.Event) bool { return eventReadable(allow, e) }, nil
}

// eventReadable reports whether e may be read under allow.
func eventReadable(allow func(policy.Action, string) bool, e workspace.Event) bool {
	switch e.Subject.Kind {
	case workspace.SubjectArtifact:
		return artifactReadable(allow, e.Subject.Name)
	case workspace.SubjectNote:
		kind, _, _ := strings.Cut(e.Subject.ID, "/")
		return allow(noteAction(false, kind))
	case workspace.SubjectPolicy:
		// A denied event's ID is the action refused, its Name the record's
		// name (an artifact's name, a note's KIND/KEY).
		switch a := policy.Action(e.Subject.ID); a {
		case policy.ArtifactRead, policy.ArtifactWrite, policy.ArtifactDelete:
			return artifactReadable(allow, e.Subject.Name)
		case policy.NoteRead, policy.NoteWrite:
			kind, _, _ := strings.Cut(e.Subject.Name, "/")
			return allow(noteAction(false, kind))
		case policy.AdminTokens:
			return allow(policy.AdminTokens, "")
		}
	}
	return true
}

// filterEvents removes from evs what keep refuses, in place.
func filterEvents(evs []workspace.Event, keep func(workspace.Event) bool) []workspace.Event {
	if keep == nil {
		return evs
	}
	return slices.DeleteFunc(evs, func(e workspace.Event) bool { return !keep(e) })
}
