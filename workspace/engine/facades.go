package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// run executes fn with an exec in a write transaction (shared with other
// writers by group commit) and appends its events; it is the path of writes
// that are not batch ops (claims, leases).
func (h *handle) run(ctx context.Context, opname, actor string, fn func(x *exec) error) error {
	return h.runHinted(ctx, opname, actor, nil, fn)
}

// runHinted is run for a job that will likely read the hints' records.
func (h *handle) runHinted(ctx context.Context, opname, actor string, hints []driver.ReadHint, fn func(x *exec) error) error {
	j := &job{actor: actor, hints: hints}
	j.apply = func(ctx context.Context, x *exec) error {
		err := fn(x)
		// A failed IfVersion (a heartbeat's) is recorded, as in Commit.
		errors.As(err, &j.conflict)
		return err
	}
	return wrapErr(opname, h.submit(ctx, j))
}

type artifacts struct{ h *handle }

func (a artifacts) Create(ctx context.Context, w workspace.Write, n workspace.NewArtifact) (workspace.Artifact, error) {
	r, err := a.h.single(ctx, "artifacts.create", w, workspace.CreateArtifactOp{Artifact: n, Message: w.Message, Fence: w.Fence})
	return derefArtifact(r.Artifact), err
}

func (a artifacts) Update(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef, c workspace.ArtifactChange) (workspace.Artifact, error) {
	r, err := a.h.single(ctx, "artifacts.update", w, workspace.UpdateArtifactOp{Ref: ref, Change: c, Cond: condOf(w)})
	return derefArtifact(r.Artifact), err
}

func (a artifacts) Delete(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef) error {
	_, err := a.h.single(ctx, "artifacts.delete", w, workspace.DeleteArtifactOp{Ref: ref, Cond: condOf(w)})
	return err
}

func (a artifacts) Rollback(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef, to int64) (workspace.Artifact, error) {
	r, err := a.h.single(ctx, "artifacts.rollback", w, workspace.RollbackArtifactOp{Ref: ref, To: to, Cond: condOf(w)})
	return derefArtifact(r.Artifact), err
}

func (a artifacts) Get(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	if err := checkRef(ref); err != nil {
		return workspace.Artifact{}, err
	}
	if ref.Name != "" {
		if err := a.h.allowArtifactRead(ctx, ref.Name, ref.ID); err != nil {
			return workspace.Artifact{}, err
		}
	}
	var hints []driver.ReadHint
	if ref.Version == 0 {
		hints = []driver.ReadHint{{Artifact: workspace.ArtifactRef{ID: ref.ID, Name: ref.Name}, Content: true}}
	}
	var out workspace.Artifact
	err := a.h.viewHinted(ctx, "artifacts.get", hints, func(tx driver.ReadTx) error {
		var err error
		if ref.ID != "" && ref.Version != 0 {
			if out, err = tx.ArtifactVersion(ctx, ref.ID, ref.Version); err != nil {
				err = versionGone(ctx, tx, ref.ID, "", ref.Version, err)
			}
		} else {
			out, err = tx.Artifact(ctx, workspace.ArtifactRef{ID: ref.ID, Name: ref.Name})
			if err == nil && ref.Version != 0 && ref.Version != out.Version {
				head := out
				if out, err = tx.ArtifactVersion(ctx, head.ID, ref.Version); err != nil {
					err = versionGone(ctx, tx, head.ID, head.Name, ref.Version, err)
				}
			}
		}
		var removed *workspace.VersionRemovedError
		if errors.As(err, &removed) {
			return err
		}
		if errors.Is(err, workspace.ErrNotFound) {
			if ref.Version != 0 {
				return fmt.Errorf("artifact %s version %d: %w", refLabel(ref), ref.Version, workspace.ErrNotFound)
			}
			return fmt.Errorf("artifact %s: %w", refLabel(ref), workspace.ErrNotFound)
		}
		if err != nil {
			return err
		}
		out.Content, err = tx.Content(ctx, out.ID, out.Version, out.SHA256)
		if err != nil {
			return fmt.Errorf("artifact %s version %d content: %w", refLabel(ref), out.Version, err)
		}
		if out.Content == nil {
			out.Content = []byte{}
		}
		return nil
	})
	if err == nil && ref.Name == "" {
		if err := a.h.allowArtifactRead(ctx, out.Name, out.ID); err != nil {
			return workspace.Artifact{}, err
		}
	}
	return out, err
}

func (a artifacts) Versions(ctx context.Context, ref workspace.ArtifactRef) ([]workspace.Artifact, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	var out []workspace.Artifact
	err := a.h.view(ctx, "artifacts.versions", func(tx driver.ReadTx) error {
		id := ref.ID
		if id == "" {
			head, err := tx.Artifact(ctx, workspace.ArtifactRef{Name: ref.Name})
			if errors.Is(err, workspace.ErrNotFound) {
				return fmt.Errorf("artifact %q: %w", ref.Name, workspace.ErrNotFound)
			}
			if err != nil {
				return err
			}
			id = head.ID
		}
		var err error
		out, err = tx.ArtifactVersions(ctx, id)
		if err == nil && len(out) == 0 {
			err = fmt.Errorf("artifact %s: %w", refLabel(ref), workspace.ErrNotFound)
		}
		return err
	})
	if err == nil {
		if err := a.h.allowArtifactRead(ctx, out[len(out)-1].Name, out[0].ID); err != nil {
			return nil, err
		}
	}
	return out, err
}

func (a artifacts) List(ctx context.Context, f workspace.ArtifactFilter) (workspace.ArtifactPage, error) {
	limit, err := checkLimit("limit", f.Limit, maxPageLimit)
	if err != nil {
		return workspace.ArtifactPage{}, err
	}
	f.Limit = limit
	if f.Kind != "" {
		if err := checkKind("kind", f.Kind); err != nil {
			return workspace.ArtifactPage{}, err
		}
	}
	if err := checkLine("name prefix", f.NamePrefix, workspace.MaxNameLen); err != nil {
		return workspace.ArtifactPage{}, err
	}
	if err := checkText("after", f.After, workspace.MaxNameLen); err != nil {
		return workspace.ArtifactPage{}, err
	}
	if err := checkText("owner", f.Owner, workspace.MaxActorLen); err != nil {
		return workspace.ArtifactPage{}, err
	}
	if err := checkOptionalID("task id", f.TaskID); err != nil {
		return workspace.ArtifactPage{}, err
	}
	if err := checkLabels("labels", f.Labels); err != nil {
		return workspace.ArtifactPage{}, err
	}
	allow, err := a.h.readFilter(ctx)
	if err != nil {
		return workspace.ArtifactPage{}, err
	}
	var page workspace.ArtifactPage
	err = a.h.view(ctx, "artifacts.list", func(tx driver.ReadTx) error {
		var err error
		page.Artifacts, err = tx.ListArtifacts(ctx, f)
		return err
	})
	if n := len(page.Artifacts); n == f.Limit {
		page.Next = page.Artifacts[n-1].Name
	}
	if allow != nil {
		// The cursor stays the unfiltered page's: a filtered page may hold
		// fewer than Limit, or none, with more to follow.
		page.Artifacts = slices.DeleteFunc(page.Artifacts, func(x workspace.Artifact) bool { return !artifactReadable(allow, x.Name) })
	}
	return page, err
}

func derefArtifact(a *workspace.Artifact) workspace.Artifact {
	if a == nil {
		return workspace.Artifact{}
	}
	return *a
}

func condOf(w workspace.Write) workspace.Cond {
	return workspace.Cond{IfVersion: w.IfVersion, Fence: w.Fence, Message: w.Message}
}

type tasks struct{ h *handle }

// claimRecheck bounds how long a waiting Claim goes without looking for
// tasks whose claim lapsed.
const claimRecheck = time.Second

func (t tasks) Create(ctx context.Context, w workspace.Write, n workspace.NewTask) (workspace.Task, error) {
	r, err := t.h.single(ctx, "tasks.create", w, workspace.CreateTaskOp{Task: n, Message: w.Message})
	return derefTask(r.Task), err
}

func (t tasks) Update(ctx context.Context, w workspace.Write, id string, c workspace.TaskChange) (workspace.Task, error) {
	r, err := t.h.single(ctx, "tasks.update", w, workspace.UpdateTaskOp{ID: id, Change: c, Cond: condOf(w)})
	return derefTask(r.Task), err
}

func (t tasks) setStatus(ctx context.Context, op string, w workspace.Write, id string, s workspace.TaskStatus, res *workspace.TaskResult) (workspace.Task, error) {
	r, err := t.h.single(ctx, op, w, workspace.UpdateTaskOp{ID: id, Change: workspace.TaskChange{Status: &s, Result: res}, Cond: condOf(w)})
	return derefTask(r.Task), err
}

func (t tasks) Complete(ctx context.Context, w workspace.Write, id string, r workspace.TaskResult) (workspace.Task, error) {
	return t.setStatus(ctx, "tasks.complete", w, id, workspace.TaskDone, &r)
}

func (t tasks) Fail(ctx context.Context, w workspace.Write, id string, r workspace.TaskResult) (workspace.Task, error) {
	return t.setStatus(ctx, "tasks.fail", w, id, workspace.TaskFailed, &r)
}

func (t tasks) Release(ctx context.Context, w workspace.Write, id string) (workspace.Task, error) {
	return t.setStatus(ctx, "tasks.release", w, id, workspace.TaskPending, nil)
}

func (t tasks) Get(ctx context.Context, id string) (workspace.Task, error) {
	if err := checkID("task id", id); err != nil {
		return workspace.Task{}, err
	}
	var out workspace.Task
	err := t.h.viewHinted(ctx, "tasks.get", []driver.ReadHint{{Task: id}}, func(tx driver.ReadTx) error {
		var err error
		out, err = tx.Task(ctx, id)
		if errors.Is(err, workspace.ErrNotFound) {
			return fmt.Errorf("task %s: %w", id, workspace.ErrNotFound)
		}
		return err
	})
	return out, err
}

func (t tasks) Claim(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	if err := checkActor(r.Actor); err != nil {
		return workspace.Task{}, err
	}
	if r.Lease == 0 {
		r.Lease = workspace.DefaultClaimLease
	}
	if err := checkTTL("lease", r.Lease); err != nil {
		return workspace.Task{}, err
	}
	if err := checkLabels("labels", r.Labels); err != nil {
		return workspace.Task{}, err
	}
	if err := checkOptionalID("parent id", r.ParentID); err != nil {
		return workspace.Task{}, err
	}
	hints := []driver.ReadHint{{Claim: &r}}
	for {
		// Each try is checked against the policy of its time.
		w, err := t.h.who(ctx, r.Actor)
		if err != nil {
			return workspace.Task{}, wrapErr("tasks.claim", err)
		}
		paused, err := t.h.pauseOf(ctx, r.Actor)
		if err != nil {
			return workspace.Task{}, wrapErr("tasks.claim", err)
		}
		wake := t.h.hub.watch()
		var out workspace.Task
		err = t.h.runHinted(ctx, "tasks.claim", r.Actor, hints, func(x *exec) error {
			if err := x.allow(w, policy.TaskClaim, "", workspace.Subject{Kind: "task"}); err != nil {
				return err
			}
			x.paused = paused
			if err := x.gate(ctx); err != nil {
				return err
			}
			var err error
			out, err = x.claim(ctx, r)
			return err
		})
		if err == nil || !r.Wait || !errors.Is(err, workspace.ErrNoTask) {
			return out, err
		}
		// A lapsed claim frees its task without a commit that would wake
		// us, so look again now and then too.
		if err := t.h.hub.wait(ctx, t.h.ctx.Done(), wake, time.Now().Add(claimRecheck)); err != nil {
			return workspace.Task{}, err
		}
	}
}

func (t tasks) Heartbeat(ctx context.Context, w workspace.Write, id string, lease time.Duration) (workspace.Task, error) {
	if err := checkActor(w.Actor); err != nil {
		return workspace.Task{}, err
	}
	if err := checkID("task id", id); err != nil {
		return workspace.Task{}, err
	}
	if lease == 0 {
		lease = workspace.DefaultClaimLease
	}
	if err := checkTTL("lease", lease); err != nil {
		return workspace.Task{}, err
	}
	if err := checkVersion("if-version", w.IfVersion); err != nil {
		return workspace.Task{}, err
	}
	if p, _ := wsconn.PrincipalFrom(ctx); impersonation(p, w.Actor) != nil {
		return workspace.Task{}, impersonation(p, w.Actor)
	}
	var out workspace.Task
	err := t.h.run(ctx, "tasks.heartbeat", w.Actor, func(x *exec) error {
		var err error
		out, err = x.heartbeat(ctx, id, w.IfVersion, lease)
		return err
	})
	return out, err
}

func (t tasks) List(ctx context.Context, f workspace.TaskFilter) (workspace.TaskPage, error) {
	f, err := checkTaskFilter(f)
	if err != nil {
		return workspace.TaskPage{}, err
	}
	var page workspace.TaskPage
	err = t.h.view(ctx, "tasks.list", func(tx driver.ReadTx) error {
		var err error
		page.Tasks, err = tx.ListTasks(ctx, f)
		return err
	})
	if n := len(page.Tasks); n == f.Limit {
		page.Next = page.Tasks[n-1].ID
	}
	return page, err
}

// ListReady is List of the tasks Claim would take: pending, every
// dependency done (f.Status, if set, must be pending). The order and the
// paging are List's; the store reads no more pending tasks than the page
// passes over, where List and a filter after it read every task.
func (t tasks) ListReady(ctx context.Context, f workspace.TaskFilter) (workspace.TaskPage, error) {
	if f.Status != "" && f.Status != workspace.TaskPending {
		return workspace.TaskPage{}, invalid("status", "ready tasks are pending, not %q", f.Status)
	}
	f.Status = workspace.TaskPending
	f, err := checkTaskFilter(f)
	if err != nil {
		return workspace.TaskPage{}, err
	}
	var page workspace.TaskPage
	err = t.h.view(ctx, "tasks.list", func(tx driver.ReadTx) error {
		var err error
		page.Tasks, err = listReady(ctx, tx, f)
		return err
	})
	if n := len(page.Tasks); n == f.Limit {
		page.Next = page.Tasks[n-1].ID
	}
	return page, err
}

// checkTaskFilter checks a List filter and sets its default limit.
func checkTaskFilter(f workspace.TaskFilter) (workspace.TaskFilter, error) {
	limit, err := checkLimit("limit", f.Limit, maxPageLimit)
	if err != nil {
		return f, err
	}
	f.Limit = limit
	if f.Status != "" && !f.Status.Valid() {
		return f, invalid("status", "%q is not a task status", f.Status)
	}
	if f.After != "" {
		if err := checkID("after", f.After); err != nil {
			return f, err
		}
	}
	if err := checkOptionalID("parent id", f.ParentID); err != nil {
		return f, err
	}
	if err := checkText("assignee", f.Assignee, workspace.MaxActorLen); err != nil {
		return f, err
	}
	if err := checkLabels("labels", f.Labels); err != nil {
		return f, err
	}
	return f, nil
}

func derefTask(t *workspace.Task) workspace.Task {
	if t == nil {
		return workspace.Task{}
	}
	return *t
}

type notes struct{ h *handle }

func (n notes) Put(ctx context.Context, w workspace.Write, p workspace.NotePut) (workspace.Note, error) {
	r, err := n.h.single(ctx, "notes.put", w, workspace.PutNoteOp{Note: p, Cond: condOf(w)})
	if r.Note == nil {
		return workspace.Note{}, err
	}
	return *r.Note, err
}

func (n notes) Delete(ctx context.Context, w workspace.Write, kind, key string) error {
	_, err := n.h.single(ctx, "notes.delete", w, workspace.DeleteNoteOp{Kind: kind, Key: key, Cond: condOf(w)})
	return err
}

func (n notes) Get(ctx context.Context, kind, key string) (workspace.Note, error) {
	if err := checkKind("note kind", kind); err != nil {
		return workspace.Note{}, err
	}
	if err := checkKey("note key", key, workspace.MaxKeyLen); err != nil {
		return workspace.Note{}, err
	}
	if err := reservedRefusal(ctx, principalActor(ctx), policy.NoteRead, kind, true); err != nil {
		return workspace.Note{}, err
	}
	act, obj := noteAction(false, kind)
	if err := n.h.allowRead(ctx, act, obj, workspace.Subject{Kind: "note", Name: kind + "/" + key}); err != nil {
		return workspace.Note{}, err
	}
	var out workspace.Note
	err := n.h.viewHinted(ctx, "notes.get", []driver.ReadHint{{NoteKind: kind, NoteKey: key}}, func(tx driver.ReadTx) error {
		var err error
		out, err = tx.Note(ctx, kind, key)
		if errors.Is(err, workspace.ErrNotFound) {
			return fmt.Errorf("note %s/%s: %w", kind, key, workspace.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return out, err
	}
	if err := n.h.allowRecordRead(ctx, out); err != nil {
		return workspace.Note{}, err
	}
	return out, nil
}

func (n notes) List(ctx context.Context, f workspace.NoteFilter) (workspace.NotePage, error) {
	limit, err := checkLimit("limit", f.Limit, maxPageLimit)
	if err != nil {
		return workspace.NotePage{}, err
	}
	q := driver.NoteQuery{Kind: f.Kind, Limit: limit}
	if f.Kind != "" {
		if err := checkKind("note kind", f.Kind); err != nil {
			return workspace.NotePage{}, err
		}
		if err := reservedRefusal(ctx, principalActor(ctx), policy.NoteRead, f.Kind, true); err != nil {
			return workspace.NotePage{}, err
		}
	}
	if f.After != "" {
		kind, key, ok := strings.Cut(f.After, "/")
		if !ok || checkKind("after", kind) != nil || checkKey("after", key, workspace.MaxKeyLen) != nil {
			return workspace.NotePage{}, invalid("after", "%q is not a note cursor (KIND/KEY)", truncate(f.After, 64))
		}
		q.AfterKind, q.AfterKey = kind, key
	}
	allow, err := n.h.readFilter(ctx)
	if err != nil {
		return workspace.NotePage{}, err
	}
	records := recordFilter(allow)
	var page workspace.NotePage
	err = n.h.view(ctx, "notes.list", func(tx driver.ReadTx) error {
		var err error
		page.Notes, err = tx.ListNotes(ctx, q)
		return err
	})
	if c := len(page.Notes); c == limit {
		last := page.Notes[c-1]
		page.Next = last.Kind + "/" + last.Key
	}
	// A listing of every kind leaves out the reserved ones: they are the
	// system's records, read through the operations that own them. A
	// record naming an artifact the reader may not read is left out too.
	page.Notes = slices.DeleteFunc(page.Notes, func(x workspace.Note) bool {
		return (f.Kind == "" && reservedKind(x.Kind)) || (allow != nil && !allow(noteAction(false, x.Kind))) ||
			(records != nil && !records(x))
	})
	return page, err
}

type locks struct{ h *handle }

func checkResource(r string) error { return checkKey("resource", r, workspace.MaxNameLen) }

func (l locks) Acquire(ctx context.Context, r workspace.AcquireRequest) (workspace.Lease, error) {
	if err := checkResource(r.Resource); err != nil {
		return workspace.Lease{}, err
	}
	if err := checkActor(r.Owner); err != nil {
		return workspace.Lease{}, err
	}
	if err := checkTTL("ttl", r.TTL); err != nil {
		return workspace.Lease{}, err
	}
	if err := checkText("message", r.Message, workspace.MaxTextLen); err != nil {
		return workspace.Lease{}, err
	}
	// waitedSince is when the first try found the lease held (zero until
	// one did): the acquire that ends the wait records how long it was.
	var waitedSince time.Time
	for {
		w, err := l.h.who(ctx, r.Owner)
		if err != nil {
			return workspace.Lease{}, wrapErr("locks.acquire", err)
		}
		wake := l.h.hub.watch()
		var out workspace.Lease
		var waited time.Duration
		if !waitedSince.IsZero() {
			waited = max(time.Since(waitedSince), time.Millisecond)
		}
		paused, err := l.h.pauseOf(ctx, r.Owner)
		if err != nil {
			return workspace.Lease{}, wrapErr("locks.acquire", err)
		}
		err = l.h.runHinted(ctx, "locks.acquire", r.Owner, []driver.ReadHint{{Lease: r.Resource}}, func(x *exec) error {
			if err := x.allow(w, policy.Lock, r.Resource, lockSubject(r.Resource)); err != nil {
				return err
			}
			// A paused owner may extend what it holds, not take more.
			if x.paused = paused; paused != nil {
				if l, err := x.tx.Lease(ctx, r.Resource); err != nil || !x.live(l) || l.Owner != r.Owner {
					if err := x.gate(ctx); err != nil {
						return err
					}
				}
			}
			var err error
			out, err = x.acquire(ctx, r, waited)
			return err
		})
		var le *workspace.LockedError
		if err == nil || !r.Wait || !errors.As(err, &le) {
			return out, err
		}
		if waitedSince.IsZero() {
			waitedSince = time.Now()
		}
		// Woken by any commit (the release, in-process or seen by the
		// watcher) or by the holder's expiry, whichever comes first.
		if err := l.h.hub.wait(ctx, l.h.ctx.Done(), wake, le.ExpiresAt); err != nil {
			return workspace.Lease{}, err
		}
	}
}

func (l locks) Renew(ctx context.Context, lease workspace.Lease, ttl time.Duration) (workspace.Lease, error) {
	if err := checkLease(lease); err != nil {
		return workspace.Lease{}, err
	}
	if err := checkTTL("ttl", ttl); err != nil {
		return workspace.Lease{}, err
	}
	w, err := l.h.who(ctx, lease.Owner)
	if err != nil {
		return workspace.Lease{}, wrapErr("locks.renew", err)
	}
	var out workspace.Lease
	err = l.h.runHinted(ctx, "locks.renew", lease.Owner, []driver.ReadHint{{Lease: lease.Resource}}, func(x *exec) error {
		if err := x.allow(w, policy.Lock, lease.Resource, lockSubject(lease.Resource)); err != nil {
			return err
		}
		var err error
		out, err = x.renew(ctx, lease, ttl)
		return err
	})
	return out, err
}

func (l locks) Release(ctx context.Context, lease workspace.Lease) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	w, err := l.h.who(ctx, lease.Owner)
	if err != nil {
		return wrapErr("locks.release", err)
	}
	return l.h.runHinted(ctx, "locks.release", lease.Owner, []driver.ReadHint{{Lease: lease.Resource}}, func(x *exec) error {
		if err := x.allow(w, policy.Lock, lease.Resource, lockSubject(lease.Resource)); err != nil {
			return err
		}
		return x.releaseLock(ctx, lease.Resource, lease.Owner, lease.Token, "")
	})
}

func (l locks) ForceRelease(ctx context.Context, w workspace.Write, resource string) error {
	if err := checkActor(w.Actor); err != nil {
		return err
	}
	if err := checkResource(resource); err != nil {
		return err
	}
	if err := checkText("message", w.Message, workspace.MaxTextLen); err != nil {
		return err
	}
	who, err := l.h.who(ctx, w.Actor)
	if err != nil {
		return wrapErr("locks.force_release", err)
	}
	return l.h.runHinted(ctx, "locks.force_release", w.Actor, []driver.ReadHint{{Lease: resource}}, func(x *exec) error {
		if err := x.allow(who, policy.Lock, resource, lockSubject(resource)); err != nil {
			return err
		}
		return x.forceRelease(ctx, resource, w.Message)
	})
}

func (l locks) Get(ctx context.Context, resource string) (workspace.Lease, error) {
	if err := checkResource(resource); err != nil {
		return workspace.Lease{}, err
	}
	var out workspace.Lease
	err := l.h.viewHinted(ctx, "locks.get", []driver.ReadHint{{Lease: resource}}, func(tx driver.ReadTx) error {
		var err error
		out, err = tx.Lease(ctx, resource)
		if err == nil && (out.Owner == "" || !out.ExpiresAt.After(tx.Now())) {
			err = workspace.ErrNotFound
		}
		if errors.Is(err, workspace.ErrNotFound) {
			return fmt.Errorf("lock %q is not held: %w", resource, workspace.ErrNotFound)
		}
		return err
	})
	return out, err
}

func (l locks) List(ctx context.Context) ([]workspace.Lease, error) {
	var out []workspace.Lease
	err := l.h.view(ctx, "locks.list", func(tx driver.ReadTx) error {
		var err error
		out, err = tx.ListLeases(ctx, tx.Now())
		return err
	})
	return out, err
}

func checkLease(l workspace.Lease) error {
	if err := checkResource(l.Resource); err != nil {
		return err
	}
	if err := checkActor(l.Owner); err != nil {
		return err
	}
	if l.Token < 1 {
		return invalid("token", "%d: a lease token is at least 1", l.Token)
	}
	return nil
}
