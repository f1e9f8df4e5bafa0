package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentspace/agentspace/internal/mediatype"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/google/uuid"
)

// exec applies ops inside one store transaction and collects their events.
type exec struct {
	h      *core
	tx     driver.Tx
	actor  string
	now    time.Time
	events []workspace.Event
	// refused, when set, receives an op the policy refused (policy.go).
	refused *refusal
	// authTask is the task authorize read for a batch's first op, an
	// UpdateTaskOp: that op takes it rather than reading it again (a
	// round trip on PostgreSQL). Nothing is written between the two.
	authTask *workspace.Task
	// who is the identity of a batch's writer and the policy it was
	// checked against (nil for writes that are not batches): messages
	// read the roles and the policy's role members from it.
	who *who
	// paused is the writer's pause, read before the transaction from the
	// core's cache (pause.go); nil: not paused.
	paused *pauseRecord
}

func (x *exec) emit(typ string, subj workspace.Subject, version int64, msg string) {
	x.events = append(x.events, workspace.Event{
		Time: x.now, Actor: x.actor, Type: typ, Subject: subj, Version: version, Message: msg,
	})
}

// apply makes op's change (its op table entry's apply).
func (x *exec) apply(ctx context.Context, op workspace.Op) (workspace.OpResult, error) {
	s, err := specOf(op)
	if err != nil {
		return workspace.OpResult{}, err
	}
	return s.apply(ctx, x, op)
}

func noteResource(kind, key string) string {
	return "note:" + kind + "/" + key
}

// checkGuard enforces the record's lock: a live lease held by another actor
// refuses the write; a fence older than the newest token is stale.
func (x *exec) checkGuard(ctx context.Context, resource string, fence int64) error {
	l, err := x.tx.Lease(ctx, resource)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if fence > 0 && l.Token > fence {
		return &workspace.StaleFenceError{Resource: resource, Fence: fence, Newest: l.Token}
	}
	if l.Owner != "" && l.Owner != x.actor && l.ExpiresAt.After(x.now) {
		return &workspace.LockedError{Resource: resource, Holder: l.Owner, Token: l.Token, ExpiresAt: l.ExpiresAt}
	}
	return nil
}

func checkIfVersion(subj workspace.Subject, want, have int64) error {
	if want != 0 && want != have {
		return &workspace.ConflictError{Subject: subj, Expected: want, Current: have}
	}
	return nil
}

func artifactSubject(a workspace.Artifact) workspace.Subject {
	return workspace.Subject{Kind: workspace.SubjectArtifact, ID: a.ID, Name: a.Name}
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func (x *exec) artifactHead(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	a, err := x.tx.Artifact(ctx, workspace.ArtifactRef{ID: ref.ID, Name: ref.Name})
	if errors.Is(err, workspace.ErrNotFound) {
		return a, fmt.Errorf("artifact %s: %w", refLabel(ref), workspace.ErrNotFound)
	}
	return a, err
}

func refLabel(ref workspace.ArtifactRef) string {
	if ref.ID != "" {
		return ref.ID
	}
	return fmt.Sprintf("%q", ref.Name)
}

func (x *exec) createArtifact(ctx context.Context, o workspace.CreateArtifactOp) (*workspace.Artifact, error) {
	if _, err := x.tx.Artifact(ctx, workspace.ArtifactRef{Name: o.Artifact.Name}); err == nil {
		return nil, fmt.Errorf("artifact %q: %w", o.Artifact.Name, workspace.ErrAlreadyExists)
	} else if !errors.Is(err, workspace.ErrNotFound) {
		return nil, err
	}
	// The name's lock guards a create as it guards an update: a lease row
	// outlives its artifact and is never deleted, so its token is the
	// fence whether or not the artifact existed when the lease was taken.
	if err := x.checkGuard(ctx, workspace.ArtifactResource(o.Artifact.Name), o.Fence); err != nil {
		return nil, err
	}
	if o.Artifact.TaskID != "" {
		if _, err := x.tx.Task(ctx, o.Artifact.TaskID); err != nil {
			return nil, fmt.Errorf("artifact task %s: %w", o.Artifact.TaskID, err)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	content := o.Artifact.Content
	if content == nil {
		content = []byte{}
	}
	a := workspace.Artifact{
		ID: id.String(), Name: o.Artifact.Name, Kind: o.Artifact.Kind, Owner: x.actor, Version: 1,
		ContentType: o.Artifact.ContentType, SHA256: hashHex(content), Size: int64(len(content)),
		Labels: cloneLabels(o.Artifact.Labels), TaskID: o.Artifact.TaskID,
		CreatedAt: x.now, CreatedBy: x.actor, UpdatedAt: x.now, UpdatedBy: x.actor,
	}
	if a.Kind == "" {
		a.Kind = "output"
	}
	if a.ContentType == "" {
		// One inference for every face: the Go API, HTTP, MCP and wsctl.
		a.ContentType = mediatype.For(a.Name, content)
	}
	if err := x.tx.PutArtifact(ctx, a, content); err != nil {
		return nil, err
	}
	x.emit(workspace.EventArtifactCreated, artifactSubject(a), 1, o.Message)
	return &a, nil
}

// writableHead returns the artifact's head once the write's conditions
// hold: its IfVersion, and the artifact's lock and fence.
func (x *exec) writableHead(ctx context.Context, ref workspace.ArtifactRef, c workspace.Cond) (workspace.Artifact, error) {
	head, err := x.artifactHead(ctx, ref)
	if err != nil {
		return head, err
	}
	if err := checkIfVersion(artifactSubject(head), c.IfVersion, head.Version); err != nil {
		return head, err
	}
	return head, x.checkGuard(ctx, workspace.ArtifactResource(head.Name), c.Fence)
}

func (x *exec) updateArtifact(ctx context.Context, o workspace.UpdateArtifactOp) (*workspace.Artifact, error) {
	head, err := x.writableHead(ctx, o.Ref, o.Cond)
	if err != nil {
		return nil, err
	}
	next := head
	c := o.Change
	var content []byte
	if c.Content != nil {
		next.SHA256 = hashHex(c.Content)
		next.Size = int64(len(c.Content))
		if next.SHA256 != head.SHA256 {
			content = c.Content
		}
	}
	if c.Kind != nil {
		next.Kind = *c.Kind
	}
	if c.ContentType != nil {
		next.ContentType = *c.ContentType
		if next.ContentType == "" {
			next.ContentType = "application/octet-stream"
		}
	}
	if c.Owner != nil {
		next.Owner = *c.Owner
	}
	if c.TaskID != nil {
		if *c.TaskID != "" {
			if _, err := x.tx.Task(ctx, *c.TaskID); err != nil {
				return nil, fmt.Errorf("artifact task %s: %w", *c.TaskID, err)
			}
		}
		next.TaskID = *c.TaskID
	}
	if c.Labels != nil {
		next.Labels = cloneLabels(c.Labels)
	} else {
		next.Labels = cloneLabels(head.Labels)
	}
	next.Version = head.Version + 1
	next.UpdatedAt, next.UpdatedBy = x.now, x.actor
	if err := x.tx.PutArtifact(ctx, next, content); err != nil {
		return nil, err
	}
	x.emit(workspace.EventArtifactUpdated, artifactSubject(next), next.Version, o.Message)
	return &next, nil
}

func (x *exec) deleteArtifact(ctx context.Context, o workspace.DeleteArtifactOp) error {
	head, err := x.writableHead(ctx, o.Ref, o.Cond)
	if err != nil {
		return err
	}
	if err := x.tx.DeleteArtifact(ctx, head.ID); err != nil {
		return err
	}
	x.emit(workspace.EventArtifactDeleted, artifactSubject(head), head.Version, o.Message)
	return nil
}

func (x *exec) rollbackArtifact(ctx context.Context, o workspace.RollbackArtifactOp) (*workspace.Artifact, error) {
	head, err := x.writableHead(ctx, o.Ref, o.Cond)
	if err != nil {
		return nil, err
	}
	if o.To >= head.Version {
		return nil, invalid("to", "version %d is not older than the head (%d)", o.To, head.Version)
	}
	old, err := x.tx.ArtifactVersion(ctx, head.ID, o.To)
	if err != nil {
		if gone := versionGone(ctx, x.tx, head.ID, head.Name, o.To, err); gone != err {
			return nil, gone
		}
		return nil, fmt.Errorf("artifact %q version %d: %w", head.Name, o.To, err)
	}
	next := old
	next.ID, next.Name = head.ID, head.Name
	next.CreatedAt, next.CreatedBy = head.CreatedAt, head.CreatedBy
	next.Labels = cloneLabels(old.Labels)
	next.Version = head.Version + 1
	next.UpdatedAt, next.UpdatedBy = x.now, x.actor
	if err := x.tx.PutArtifact(ctx, next, nil); err != nil {
		return nil, err
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("rolled back to version %d", o.To)
	}
	x.emit(workspace.EventArtifactRolledBack, artifactSubject(next), next.Version, msg)
	return &next, nil
}

func taskSubject(t workspace.Task) workspace.Subject {
	return workspace.Subject{Kind: workspace.SubjectTask, ID: t.ID, Name: t.Title}
}

func (x *exec) createTask(ctx context.Context, o workspace.CreateTaskOp) (*workspace.Task, error) {
	if o.Task.ParentID != "" {
		if _, err := x.tx.Task(ctx, o.Task.ParentID); err != nil {
			return nil, fmt.Errorf("parent task %s: %w", o.Task.ParentID, err)
		}
	}
	var deps []string
	for _, d := range o.Task.DependsOn {
		if slices.Contains(deps, d) {
			continue
		}
		if _, err := x.tx.Task(ctx, d); err != nil {
			return nil, fmt.Errorf("dependency %s: %w", d, err)
		}
		deps = append(deps, d)
	}
	var areas []string
	for _, a := range o.Task.Areas {
		if !slices.Contains(areas, a) {
			areas = append(areas, a)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	t := workspace.Task{
		ID: id.String(), Title: o.Task.Title, Description: o.Task.Description, Status: workspace.TaskPending,
		Assignee: o.Task.Assignee, ParentID: o.Task.ParentID, DependsOn: deps, Areas: areas, Priority: o.Task.Priority,
		Labels: cloneLabels(o.Task.Labels), Version: 1,
		CreatedAt: x.now, CreatedBy: x.actor, UpdatedAt: x.now, UpdatedBy: x.actor,
	}
	if err := x.tx.PutTask(ctx, t); err != nil {
		return nil, err
	}
	x.emit(workspace.EventTaskCreated, taskSubject(t), 1, o.Message)
	return &t, nil
}

func (x *exec) task(ctx context.Context, id string) (workspace.Task, error) {
	t, err := x.tx.Task(ctx, id)
	if errors.Is(err, workspace.ErrNotFound) {
		return t, fmt.Errorf("task %s: %w", id, workspace.ErrNotFound)
	}
	return t, err
}

// claimLapsed reports whether t is in_progress under a claim that has expired.
func (x *exec) claimLapsed(t workspace.Task) bool {
	return t.Status == workspace.TaskInProgress && !t.LeaseExpiresAt.IsZero() && !t.LeaseExpiresAt.After(x.now)
}

// reap returns a task whose claim lapsed to pending, recorded as task.released.
func (x *exec) reap(ctx context.Context, t workspace.Task) (workspace.Task, error) {
	prev := t.Assignee
	t.Status, t.Assignee, t.LeaseExpiresAt = workspace.TaskPending, "", time.Time{}
	t.Version++
	t.UpdatedAt, t.UpdatedBy = x.now, x.actor
	if err := x.tx.PutTask(ctx, t); err != nil {
		return t, err
	}
	x.emit(workspace.EventTaskReleased, taskSubject(t), t.Version, fmt.Sprintf("claim by %s expired", prev))
	return t, nil
}

func (x *exec) updateTask(ctx context.Context, o workspace.UpdateTaskOp) (*workspace.Task, error) {
	var (
		t   workspace.Task
		err error
	)
	if p := x.authTask; p != nil && p.ID == o.ID {
		t, x.authTask = *p, nil
	} else if t, err = x.task(ctx, o.ID); err != nil {
		return nil, err
	}
	if err := checkIfVersion(taskSubject(t), o.IfVersion, t.Version); err != nil {
		return nil, err
	}
	if err := x.checkGuard(ctx, driver.TaskResource(t.ID), o.Fence); err != nil {
		return nil, err
	}
	c := o.Change
	typ := workspace.EventTaskUpdated
	// A status equal to the current one is not a transition: it is refused
	// like any other illegal one, so a late Complete cannot overwrite the
	// result of a task that is already done.
	if c.Status != nil {
		next := *c.Status
		if x.claimLapsed(t) {
			if t.Assignee == x.actor && next != workspace.TaskCancelled {
				return nil, fmt.Errorf("task %s: claim expired at %s: %w", t.ID, t.LeaseExpiresAt.Format(time.RFC3339Nano), workspace.ErrLockLost)
			}
			if t, err = x.reap(ctx, t); err != nil {
				return nil, err
			}
		}
		if next == workspace.TaskInProgress {
			return nil, invalid("status", "a task becomes in_progress only through Claim")
		}
		if t.Status == workspace.TaskPending && (next == workspace.TaskDone || next == workspace.TaskFailed) {
			// Only a claim's holder finishes a task, and a pending task has
			// none: the caller's claim, if it had one, was given back.
			return nil, fmt.Errorf("task %s is pending: %q does not hold it (a stop, a release or an expired claim gives a claim back): claim it again: %w", t.ID, x.actor, workspace.ErrNotHolder)
		}
		if !t.Status.CanBecome(next) {
			return nil, invalid("status", "task %s cannot go from %s to %s", t.ID, t.Status, next)
		}
		if t.Status == workspace.TaskInProgress && next != workspace.TaskCancelled && t.Assignee != x.actor {
			return nil, fmt.Errorf("task %s is claimed by %q: %w", t.ID, t.Assignee, workspace.ErrNotHolder)
		}
		if t.Status == workspace.TaskInProgress {
			t.LeaseExpiresAt = time.Time{}
			if next == workspace.TaskPending {
				t.Assignee = ""
				typ = workspace.EventTaskReleased
			}
		}
		t.Status = next
	}
	if c.Title != nil {
		t.Title = *c.Title
	}
	if c.Description != nil {
		t.Description = *c.Description
	}
	if c.Assignee != nil {
		if t.Status == workspace.TaskInProgress && *c.Assignee != t.Assignee {
			return nil, invalid("assignee", "task %s is in progress: release it before reassigning", t.ID)
		}
		t.Assignee = *c.Assignee
	}
	if c.Priority != nil {
		t.Priority = *c.Priority
	}
	if c.Labels != nil {
		t.Labels = cloneLabels(c.Labels)
	}
	if c.Result != nil {
		t.Result = workspace.TaskResult{Summary: c.Result.Summary, Artifacts: slices.Clone(c.Result.Artifacts)}
	}
	t.Version++
	t.UpdatedAt, t.UpdatedBy = x.now, x.actor
	if err := x.tx.PutTask(ctx, t); err != nil {
		return nil, err
	}
	msg := o.Message
	if msg == "" && c.Status != nil {
		msg = "status " + string(t.Status)
	}
	x.emit(typ, taskSubject(t), t.Version, msg)
	return &t, nil
}

// claim takes the best ready task for r.Actor. It reaps lapsed claims first.
func (x *exec) claim(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	lapsed, err := x.tx.ExpiredClaims(ctx, x.now, 100)
	if err != nil {
		return workspace.Task{}, err
	}
	for _, t := range lapsed {
		if _, err := x.reap(ctx, t); err != nil {
			return workspace.Task{}, err
		}
	}
	var t workspace.Task
	if r.AvoidOverlap {
		t, err = x.readyApart(ctx, r)
	} else {
		t, err = x.tx.ReadyTask(ctx, r)
	}
	if errors.Is(err, workspace.ErrNotFound) {
		return workspace.Task{}, workspace.ErrNoTask
	}
	if err != nil {
		return workspace.Task{}, err
	}
	t.Status, t.Assignee = workspace.TaskInProgress, x.actor
	t.Attempts++
	t.LeaseExpiresAt = x.now.Add(r.Lease)
	t.Version++
	t.UpdatedAt, t.UpdatedBy = x.now, x.actor
	if err := x.tx.PutTask(ctx, t); err != nil {
		return workspace.Task{}, err
	}
	x.emit(workspace.EventTaskClaimed, taskSubject(t), t.Version, fmt.Sprintf("attempt %d", t.Attempts))
	return t, nil
}

func (x *exec) heartbeat(ctx context.Context, id string, ifVersion int64, lease time.Duration) (workspace.Task, error) {
	t, err := x.task(ctx, id)
	if err != nil {
		return t, err
	}
	if err := checkIfVersion(taskSubject(t), ifVersion, t.Version); err != nil {
		return t, err
	}
	if t.Status != workspace.TaskInProgress || t.Assignee != x.actor || x.claimLapsed(t) {
		return t, fmt.Errorf("task %s is not claimed by %q (status %s, assignee %q): %w", id, x.actor, t.Status, t.Assignee, workspace.ErrLockLost)
	}
	t.LeaseExpiresAt = x.now.Add(lease)
	t.Version++
	t.UpdatedAt, t.UpdatedBy = x.now, x.actor
	if err := x.tx.PutTask(ctx, t); err != nil {
		return t, err
	}
	x.emit(workspace.EventTaskUpdated, taskSubject(t), t.Version, "heartbeat")
	return t, nil
}

func noteSubject(kind, key string) workspace.Subject {
	return workspace.Subject{Kind: workspace.SubjectNote, ID: kind + "/" + key, Name: key}
}

func (x *exec) putNote(ctx context.Context, o workspace.PutNoteOp) (*workspace.Note, error) {
	subj := noteSubject(o.Note.Kind, o.Note.Key)
	n, err := x.tx.Note(ctx, o.Note.Kind, o.Note.Key)
	exists := err == nil
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return nil, err
	}
	if err := checkIfVersion(subj, o.IfVersion, n.Version); err != nil {
		return nil, err
	}
	if err := x.checkGuard(ctx, noteResource(o.Note.Kind, o.Note.Key), o.Fence); err != nil {
		return nil, err
	}
	if !exists {
		n = workspace.Note{Kind: o.Note.Kind, Key: o.Note.Key, Author: x.actor, CreatedAt: x.now}
	}
	n.Title, n.Body = o.Note.Title, o.Note.Body
	n.Version++
	n.UpdatedAt, n.UpdatedBy = x.now, x.actor
	if err := x.tx.PutNote(ctx, n); err != nil {
		return nil, err
	}
	x.emit(workspace.EventNotePut, subj, n.Version, o.Message)
	return &n, nil
}

func (x *exec) deleteNote(ctx context.Context, o workspace.DeleteNoteOp) error {
	subj := noteSubject(o.Kind, o.Key)
	n, err := x.tx.Note(ctx, o.Kind, o.Key)
	if errors.Is(err, workspace.ErrNotFound) {
		return fmt.Errorf("note %s/%s: %w", o.Kind, o.Key, workspace.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := checkIfVersion(subj, o.IfVersion, n.Version); err != nil {
		return err
	}
	if err := x.checkGuard(ctx, noteResource(o.Kind, o.Key), o.Fence); err != nil {
		return err
	}
	if err := x.tx.DeleteNote(ctx, o.Kind, o.Key); err != nil {
		return err
	}
	x.emit(workspace.EventNoteDeleted, subj, n.Version, o.Message)
	return nil
}

func lockSubject(resource string) workspace.Subject {
	return workspace.Subject{Kind: workspace.SubjectLock, ID: resource, Name: resource}
}

func (x *exec) live(l workspace.Lease) bool { return l.Owner != "" && l.ExpiresAt.After(x.now) }

// acquire takes r's lease, or renews it for its owner. waited is how long
// the caller has waited for it (zero if it has not): an acquire that ends
// a wait records it in a lock.waited event just before its lock.acquired.
func (x *exec) acquire(ctx context.Context, r workspace.AcquireRequest, waited time.Duration) (workspace.Lease, error) {
	l, err := x.tx.Lease(ctx, r.Resource)
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return workspace.Lease{}, err
	}
	subj := lockSubject(r.Resource)
	if x.live(l) {
		if l.Owner != r.Owner {
			return workspace.Lease{}, &workspace.LockedError{Resource: r.Resource, Holder: l.Owner, Token: l.Token, ExpiresAt: l.ExpiresAt}
		}
		l.ExpiresAt, l.TTL = x.now.Add(r.TTL), r.TTL
		if err := x.tx.PutLease(ctx, l); err != nil {
			return workspace.Lease{}, err
		}
		x.emit(workspace.EventLockRenewed, subj, l.Token, r.Message)
		return l, nil
	}
	if l.Owner != "" {
		x.emit(workspace.EventLockExpired, subj, l.Token,
			fmt.Sprintf("lease of %s (token %d) expired at %s", l.Owner, l.Token, l.ExpiresAt.Format(time.RFC3339Nano)))
	}
	next := workspace.Lease{Resource: r.Resource, Owner: r.Owner, Token: l.Token + 1, AcquiredAt: x.now, ExpiresAt: x.now.Add(r.TTL), TTL: r.TTL}
	if err := x.tx.PutLease(ctx, next); err != nil {
		return workspace.Lease{}, err
	}
	if waited > 0 {
		x.emit(workspace.EventLockWaited, subj, next.Token, waited.Round(time.Millisecond).String())
	}
	x.emit(workspace.EventLockAcquired, subj, next.Token, r.Message)
	return next, nil
}

// holder checks that (owner, token) is the resource's current lease holder.
func (x *exec) holder(ctx context.Context, resource, owner string, token int64) (workspace.Lease, error) {
	l, err := x.tx.Lease(ctx, resource)
	if errors.Is(err, workspace.ErrNotFound) {
		return l, fmt.Errorf("lock %q was never acquired: %w", resource, workspace.ErrNotHolder)
	}
	if err != nil {
		return l, err
	}
	switch {
	case l.Token > token:
		return l, fmt.Errorf("lock %q: token %d was superseded by token %d: %w", resource, token, l.Token, workspace.ErrLockLost)
	case l.Token != token || l.Owner != owner:
		if l.Token == token && l.Owner == "" {
			return l, fmt.Errorf("lock %q token %d was released: %w", resource, token, workspace.ErrLockLost)
		}
		return l, fmt.Errorf("lock %q is not held by %q with token %d: %w", resource, owner, token, workspace.ErrNotHolder)
	}
	return l, nil
}

func (x *exec) renew(ctx context.Context, l workspace.Lease, ttl time.Duration) (workspace.Lease, error) {
	cur, err := x.holder(ctx, l.Resource, l.Owner, l.Token)
	if err != nil {
		return workspace.Lease{}, err
	}
	cur.ExpiresAt, cur.TTL = x.now.Add(ttl), ttl
	if err := x.tx.PutLease(ctx, cur); err != nil {
		return workspace.Lease{}, err
	}
	x.emit(workspace.EventLockRenewed, lockSubject(l.Resource), cur.Token, "")
	return cur, nil
}

func (x *exec) releaseLock(ctx context.Context, resource, owner string, token int64, msg string) error {
	cur, err := x.holder(ctx, resource, owner, token)
	if err != nil {
		return err
	}
	cur.Owner, cur.ExpiresAt = "", x.now
	if err := x.tx.PutLease(ctx, cur); err != nil {
		return err
	}
	x.emit(workspace.EventLockReleased, lockSubject(resource), cur.Token, msg)
	return nil
}

// forceRelease frees the lease whoever holds it and revokes its token.
// Invariant: a lease row's token is the resource's fence, at least every
// token issued (acquire) or revoked (forced release) for it, so a write
// fenced below it is stale (checkGuard). A forced release therefore moves
// the token one past the holder's: the old holder's fenced writes fail with
// ErrStaleFence and its Renew and Release with ErrLockLost, whether or not
// anyone acquires the lock after; the next acquire issues a newer token yet.
func (x *exec) forceRelease(ctx context.Context, resource, msg string) error {
	l, err := x.tx.Lease(ctx, resource)
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return err
	}
	if !x.live(l) {
		return fmt.Errorf("lock %q is not held: %w", resource, workspace.ErrNotFound)
	}
	prev, revoked := l.Owner, l.Token
	l.Owner, l.ExpiresAt, l.Token = "", x.now, l.Token+1
	if err := x.tx.PutLease(ctx, l); err != nil {
		return err
	}
	if msg == "" {
		msg = fmt.Sprintf("forced release of %s's lease (token %d)", prev, revoked)
	}
	x.emit(workspace.EventLockForced, lockSubject(resource), revoked, msg)
	return nil
}
