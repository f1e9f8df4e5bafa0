package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// Bounds of the tools' waits: a tool call holds a request open, and HTTP
// servers and clients time out long requests.
const (
	maxWait           = 60 * time.Second
	defaultEventsWait = 30 * time.Second
)

// writeFields are the conditions every write tool takes.
type writeFields struct {
	IfVersion int64  `json:"if_version,omitempty" jsonschema:"write only if the version is still this (0: any)"`
	Fence     int64  `json:"fence,omitempty" jsonschema:"your lock token on it; a newer one refuses the write"`
	Message   string `json:"message,omitempty" jsonschema:"why, kept in the event log"`
}

func (f writeFields) write(actor string) workspace.Write {
	return workspace.Write{Actor: actor, IfVersion: f.IfVersion, Fence: f.Fence, Message: f.Message}
}

type statusIn struct{}

type artifactReadIn struct {
	Name    string `json:"name" jsonschema:"artifact name, e.g. docs/plan.md"`
	Version int64  `json:"version,omitempty" jsonschema:"a past version (default: the head)"`
	Log     bool   `json:"log,omitempty" jsonschema:"list every version's metadata instead of reading content"`
}

type artifactWriteIn struct {
	Name        string            `json:"name" jsonschema:"artifact name, e.g. src/main.go"`
	Op          string            `json:"op,omitempty" jsonschema:"default: update if it exists, else create"`
	Content     *string           `json:"content,omitempty" jsonschema:"the new content (text)"`
	Kind        string            `json:"kind,omitempty" jsonschema:"design, code, review, test, plan, output..."`
	ContentType string            `json:"content_type,omitempty" jsonschema:"media type, e.g. text/markdown"`
	Labels      map[string]string `json:"labels,omitempty"`
	TaskID      string            `json:"task_id,omitempty" jsonschema:"the task it belongs to"`
	RollbackTo  int64             `json:"rollback_to,omitempty" jsonschema:"for op rollback: the version to restore"`
	writeFields
}

type artifactListIn struct {
	NamePrefix string            `json:"name_prefix,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	TaskID     string            `json:"task_id,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	After      string            `json:"after,omitempty" jsonschema:"the next cursor of the previous page"`
	Limit      int               `json:"limit,omitempty"`
}

type taskAddIn struct {
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	ParentID    string            `json:"parent_id,omitempty"`
	DependsOn   []string          `json:"depends_on,omitempty" jsonschema:"ids of tasks that must be done first"`
	Areas       []string          `json:"areas,omitempty" jsonschema:"paths the task expects to touch"`
	Priority    int               `json:"priority,omitempty" jsonschema:"higher is claimed first"`
	Labels      map[string]string `json:"labels,omitempty"`
}

type taskClaimIn struct {
	LeaseSeconds int               `json:"lease_seconds,omitempty" jsonschema:"how long the claim lives without a heartbeat (default 300)"`
	Labels       map[string]string `json:"labels,omitempty" jsonschema:"claim only tasks with these labels"`
	ParentID     string            `json:"parent_id,omitempty" jsonschema:"claim only subtasks of this task"`
	AvoidOverlap bool              `json:"avoid_overlap,omitempty" jsonschema:"prefer a task whose areas overlap no task in progress"`
	WaitSeconds  int               `json:"wait_seconds,omitempty" jsonschema:"wait up to this long (max 60) for a task to become ready"`
	Worktree     bool              `json:"worktree,omitempty" jsonschema:"also make the task's git worktree; the answer is {task, worktree} and worktree.path is where to work"`
	PerAgent     bool              `json:"per_agent,omitempty" jsonschema:"with worktree: use your own long-lived worktree and branch, reused across your tasks"`
}

type taskUpdateIn struct {
	ID           string   `json:"id"`
	Action       string   `json:"action"`
	Summary      string   `json:"summary,omitempty" jsonschema:"done/fail: what was done or why it failed"`
	Artifacts    []string `json:"artifacts,omitempty" jsonschema:"done/fail: names of the artifacts produced"`
	LeaseSeconds int      `json:"lease_seconds,omitempty" jsonschema:"heartbeat: extend the claim by this much (default 300)"`
	Title        *string  `json:"title,omitempty" jsonschema:"edit"`
	Description  *string  `json:"description,omitempty" jsonschema:"edit"`
	Priority     *int     `json:"priority,omitempty" jsonschema:"edit"`
	writeFields
}

type taskListIn struct {
	ID       string            `json:"id,omitempty" jsonschema:"get this one task"`
	Status   string            `json:"status,omitempty"`
	Assignee string            `json:"assignee,omitempty"`
	ParentID string            `json:"parent_id,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	After    string            `json:"after,omitempty"`
	Limit    int               `json:"limit,omitempty"`
}

type noteIn struct {
	Op    string `json:"op"`
	Kind  string `json:"kind,omitempty" jsonschema:"decision, constraint, glossary, friction..."`
	Key   string `json:"key,omitempty"`
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

type lockIn struct {
	Op          string `json:"op"`
	Resource    string `json:"resource,omitempty" jsonschema:"what to lock, e.g. artifact:src/main.go or file:go.mod"`
	TTLSeconds  int    `json:"ttl_seconds,omitempty" jsonschema:"acquire/renew: lease length (default 60)"`
	Token       int64  `json:"token,omitempty" jsonschema:"renew/release: the token acquire returned"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"acquire: wait up to this long (max 60) for it to be free"`
	Message     string `json:"message,omitempty"`
}

type eventsWaitIn struct {
	AfterSeq       int64    `json:"after_seq,omitempty" jsonschema:"the last seq you have seen (the head from status, or next of the last call)"`
	Types          []string `json:"types,omitempty" jsonschema:"e.g. task.created, artifact.updated"`
	SubjectKind    string   `json:"subject_kind,omitempty" jsonschema:"artifact, task, note or lock"`
	SubjectName    string   `json:"subject_name,omitempty"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"wait up to this long (default 30, max 60)"`
	Limit          int      `json:"limit,omitempty"`
}

func (s *Server) addTools() {
	tool(s, "status", "Workspace status",
		"Start here: who you act as, task counts, active tasks, live locks and recent events. The head seq is where events_wait starts.",
		nil, s.status)
	tool(s, "artifact_read", "Read an artifact",
		"Read an artifact's content and version (head or a past version), or its version log. Read before you write, and pass its version as if_version.",
		nil, s.artifactRead)
	tool(s, "artifact_write", "Write an artifact",
		"Create, update, roll back or delete an artifact. Pass if_version from your read, and fence when you hold its lock; a conflict tells you the current version.",
		map[string][]any{"op": {"create", "update", "rollback", "delete"}}, s.artifactWrite)
	tool(s, "artifact_list", "List artifacts",
		"List artifacts' metadata (no content), by name prefix, kind, owner, task or labels.",
		nil, s.artifactList)
	tool(s, "task_add", "Add a task",
		"Add a task to the shared queue, optionally under a parent and after the tasks it depends on.",
		nil, s.taskAdd)
	tool(s, "task_claim", "Claim the next task",
		"Take the best ready task for yourself, atomically: no one else gets it. Heartbeat before the lease ends; finish with task_update.",
		nil, s.taskClaim)
	tool(s, "task_update", "Update a task",
		"Heartbeat a claimed task, finish it (done with a summary and artifacts, fail), release it to the queue, or cancel, block, unblock or edit it.",
		map[string][]any{"action": {"heartbeat", "done", "fail", "release", "cancel", "block", "unblock", "edit"}}, s.taskUpdate)
	tool(s, "task_list", "List tasks",
		"List tasks by status, assignee, parent or labels, or get one by id.",
		map[string][]any{"status": {"pending", "in_progress", "blocked", "done", "failed", "cancelled"}}, s.taskList)
	tool(s, "note", "Shared notes",
		"Put, get, list or delete a note: team decisions, constraints, glossary terms. Record a decision others must follow here.",
		map[string][]any{"op": {"put", "get", "list", "delete"}}, s.note)
	tool(s, "lock", "Leases with fencing tokens",
		"Acquire, renew, release, get or list leases. Hold one on a resource before a long edit; its token is the fence for your writes.",
		map[string][]any{"op": {"acquire", "renew", "release", "get", "list"}}, s.lock)
	tool(s, "events_wait", "Wait for events",
		"Return the events after a seq at once if there are any, else wait for the next one (up to a timeout). Use it to follow others' work instead of polling.",
		nil, s.eventsWait)
	s.addMessageTools()
	s.addAgentsTool()
}

func (s *Server) status(ctx context.Context, actor string, _ statusIn) (any, error) {
	st, err := s.ws.Status(ctx)
	if err != nil {
		return nil, err
	}
	return withFields(st, map[string]any{"actor": actor})
}

// withFields is v's JSON object with extra fields added: the records'
// own MarshalJSON would hide the fields of a struct embedding them.
func withFields(v any, extra map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	maps.Copy(m, extra)
	return m, nil
}

func (s *Server) artifactRead(ctx context.Context, _ string, in artifactReadIn) (any, error) {
	ref := workspace.ArtifactRef{Name: in.Name, Version: in.Version}
	if in.Log {
		vs, err := s.ws.Artifacts().Versions(ctx, ref)
		if err != nil {
			return nil, err
		}
		return struct {
			Versions []workspace.Artifact `json:"versions"`
		}{vs}, nil
	}
	return s.ws.Artifacts().Get(ctx, ref)
}

func (s *Server) artifactWrite(ctx context.Context, actor string, in artifactWriteIn) (any, error) {
	arts := s.ws.Artifacts()
	w := in.write(actor)
	ref := workspace.ByName(in.Name)
	var content []byte
	if in.Content != nil {
		content = []byte(*in.Content)
	}
	create := func() (any, error) {
		if content == nil {
			content = []byte{}
		}
		return arts.Create(ctx, w, workspace.NewArtifact{Name: in.Name, Kind: in.Kind, Content: content,
			ContentType: in.ContentType, Labels: in.Labels, TaskID: in.TaskID})
	}
	change := workspace.ArtifactChange{Content: content, Labels: in.Labels}
	if in.Kind != "" {
		change.Kind = &in.Kind
	}
	if in.ContentType != "" {
		change.ContentType = &in.ContentType
	}
	if in.TaskID != "" {
		change.TaskID = &in.TaskID
	}
	if in.RollbackTo != 0 && in.Op != "rollback" && in.Op != "" {
		return nil, badArg("rollback_to", "only op=rollback takes it")
	}
	switch in.Op {
	case "create":
		return create()
	case "update":
		return arts.Update(ctx, w, ref, change)
	case "rollback":
		if in.RollbackTo == 0 {
			return nil, badArg("rollback_to", "op=rollback needs the version to restore")
		}
		return arts.Rollback(ctx, w, ref, in.RollbackTo)
	case "delete":
		if err := arts.Delete(ctx, w, ref); err != nil {
			return nil, err
		}
		return struct {
			Deleted string `json:"deleted"`
		}{in.Name}, nil
	case "":
		if in.RollbackTo != 0 {
			return arts.Rollback(ctx, w, ref, in.RollbackTo)
		}
		a, err := arts.Update(ctx, w, ref, change)
		if errors.Is(err, workspace.ErrNotFound) && in.IfVersion == 0 {
			return create()
		}
		return a, err
	}
	return nil, badArg("op", "%q is not one of create, update, rollback, delete", in.Op)
}

func (s *Server) artifactList(ctx context.Context, _ string, in artifactListIn) (any, error) {
	return s.ws.Artifacts().List(ctx, workspace.ArtifactFilter{Kind: in.Kind, Owner: in.Owner, NamePrefix: in.NamePrefix,
		TaskID: in.TaskID, Labels: in.Labels, After: in.After, Limit: in.Limit})
}

func (s *Server) taskAdd(ctx context.Context, actor string, in taskAddIn) (any, error) {
	return s.ws.Tasks().Create(ctx, workspace.Write{Actor: actor}, workspace.NewTask{Title: in.Title, Description: in.Description,
		ParentID: in.ParentID, DependsOn: in.DependsOn, Areas: in.Areas, Priority: in.Priority, Labels: in.Labels})
}

// seconds turns a tool's seconds argument into a duration: negative is
// bad input, zero is the default.
func seconds(field string, n int, def, most time.Duration) (time.Duration, error) {
	switch {
	case n < 0:
		return 0, badArg(field, "must not be negative")
	case n == 0:
		return def, nil
	case most > 0 && time.Duration(n)*time.Second > most:
		return 0, badArg(field, "at most %d", int(most/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

func (s *Server) taskClaim(ctx context.Context, actor string, in taskClaimIn) (any, error) {
	lease, err := seconds("lease_seconds", in.LeaseSeconds, 0, 0)
	if err != nil {
		return nil, err
	}
	wait, err := seconds("wait_seconds", in.WaitSeconds, 0, maxWait)
	if err != nil {
		return nil, err
	}
	if in.PerAgent && !in.Worktree {
		return nil, badArg("per_agent", "needs worktree")
	}
	if in.Worktree && s.opts.Worktrees == nil {
		return nil, badArg("worktree", "this server was started without a git repository, so it makes no worktrees")
	}
	req := workspace.ClaimRequest{Actor: actor, Lease: lease, Labels: in.Labels, ParentID: in.ParentID, AvoidOverlap: in.AvoidOverlap}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		req.Wait = true
	}
	t, err := s.ws.Tasks().Claim(ctx, req)
	if req.Wait && errors.Is(err, context.DeadlineExceeded) {
		return nil, workspace.ErrNoTask
	}
	if err != nil || !in.Worktree {
		return t, err
	}
	w, err := s.opts.Worktrees.StartClaimed(context.WithoutCancel(ctx), actor, t.ID, in.PerAgent)
	if err != nil {
		return nil, err
	}
	return gitwork.Claimed{Task: t, Worktree: w}, nil
}

func (s *Server) taskUpdate(ctx context.Context, actor string, in taskUpdateIn) (any, error) {
	tasks := s.ws.Tasks()
	w := in.write(actor)
	result := workspace.TaskResult{Summary: in.Summary, Artifacts: in.Artifacts}
	status := func(st workspace.TaskStatus) (any, error) {
		return tasks.Update(ctx, w, in.ID, workspace.TaskChange{Status: &st})
	}
	switch in.Action {
	case "heartbeat":
		lease, err := seconds("lease_seconds", in.LeaseSeconds, 5*time.Minute, 0)
		if err != nil {
			return nil, err
		}
		return tasks.Heartbeat(ctx, w, in.ID, lease)
	case "done":
		return tasks.Complete(ctx, w, in.ID, result)
	case "fail":
		return tasks.Fail(ctx, w, in.ID, result)
	case "release":
		return tasks.Release(ctx, w, in.ID)
	case "cancel":
		return status(workspace.TaskCancelled)
	case "block":
		return status(workspace.TaskBlocked)
	case "unblock":
		return status(workspace.TaskPending)
	case "edit":
		return tasks.Update(ctx, w, in.ID, workspace.TaskChange{Title: in.Title, Description: in.Description, Priority: in.Priority})
	}
	return nil, badArg("action", "%q is not one of heartbeat, done, fail, release, cancel, block, unblock, edit", in.Action)
}

func (s *Server) taskList(ctx context.Context, _ string, in taskListIn) (any, error) {
	if in.ID != "" {
		return s.ws.Tasks().Get(ctx, in.ID)
	}
	return s.ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskStatus(in.Status), Assignee: in.Assignee,
		ParentID: in.ParentID, Labels: in.Labels, After: in.After, Limit: in.Limit})
}

func (s *Server) note(ctx context.Context, actor string, in noteIn) (any, error) {
	notes := s.ws.Notes()
	switch in.Op {
	case "put":
		return notes.Put(ctx, workspace.Write{Actor: actor}, workspace.NotePut{Kind: in.Kind, Key: in.Key, Title: in.Title, Body: in.Body})
	case "get":
		return notes.Get(ctx, in.Kind, in.Key)
	case "list":
		return notes.List(ctx, workspace.NoteFilter{Kind: in.Kind, After: in.After, Limit: in.Limit})
	case "delete":
		if err := notes.Delete(ctx, workspace.Write{Actor: actor}, in.Kind, in.Key); err != nil {
			return nil, err
		}
		return struct {
			Deleted string `json:"deleted"`
		}{in.Kind + "/" + in.Key}, nil
	}
	return nil, badArg("op", "%q is not one of put, get, list, delete", in.Op)
}

func (s *Server) lock(ctx context.Context, actor string, in lockIn) (any, error) {
	locks := s.ws.Locks()
	ttl, err := seconds("ttl_seconds", in.TTLSeconds, time.Minute, 0)
	if err != nil {
		return nil, err
	}
	held := workspace.Lease{Resource: in.Resource, Owner: actor, Token: in.Token}
	switch in.Op {
	case "acquire":
		wait, err := seconds("wait_seconds", in.WaitSeconds, 0, maxWait)
		if err != nil {
			return nil, err
		}
		req := workspace.AcquireRequest{Resource: in.Resource, Owner: actor, TTL: ttl, Message: in.Message}
		if wait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, wait)
			defer cancel()
			req.Wait = true
		}
		l, err := locks.Acquire(ctx, req)
		if req.Wait && errors.Is(err, context.DeadlineExceeded) {
			// Say who holds it, as an attempt without waiting would.
			if cur, gerr := locks.Get(context.WithoutCancel(ctx), in.Resource); gerr == nil {
				return nil, &workspace.LockedError{Resource: cur.Resource, Holder: cur.Owner, Token: cur.Token, ExpiresAt: cur.ExpiresAt}
			}
		}
		return l, err
	case "renew":
		return locks.Renew(ctx, held, ttl)
	case "release":
		if err := locks.Release(ctx, held); err != nil {
			return nil, err
		}
		return struct {
			Released string `json:"released"`
		}{in.Resource}, nil
	case "get":
		return locks.Get(ctx, in.Resource)
	case "list":
		ls, err := locks.List(ctx)
		if err != nil {
			return nil, err
		}
		return struct {
			Locks []workspace.Lease `json:"locks"`
		}{ls}, nil
	}
	return nil, badArg("op", "%q is not one of acquire, renew, release, get, list", in.Op)
}

// eventsWait reads the events after in.AfterSeq; when there are none it
// waits, on a live subscription from the same seq, for the first one that
// matches, then reads again. The subscription starts at the seq the read
// examined, so an event committed between the two is not missed.
func (s *Server) eventsWait(ctx context.Context, _ string, in eventsWaitIn) (any, error) {
	timeout, err := seconds("timeout_seconds", in.TimeoutSeconds, defaultEventsWait, maxWait)
	if err != nil {
		return nil, err
	}
	q := workspace.EventQuery{AfterSeq: in.AfterSeq, Types: in.Types, SubjectKind: in.SubjectKind, SubjectName: in.SubjectName, Limit: in.Limit}
	page, err := s.ws.Events().Read(ctx, q)
	if err != nil || len(page.Events) > 0 {
		return page, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sq := q
	sq.AfterSeq, sq.Limit = max(page.Next, in.AfterSeq), 0
	sub, err := s.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: sq, Heartbeat: -1})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	for {
		m, err := sub.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			// Nothing came: an empty page, whose next is where to wait again.
			return page, nil
		}
		if err != nil {
			return nil, err
		}
		if !m.Progress {
			q.AfterSeq = sq.AfterSeq
			return s.ws.Events().Read(context.WithoutCancel(ctx), q)
		}
	}
}

// isText reports whether b reads as text: UTF-8 without NUL bytes, the
// test the workspace's JSON uses for "content_encoding": "utf-8".
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }
