package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// The language-neutral scenario of clients/scenario (its README gives the
// format): the Python and TypeScript clients' tests run the same file, so
// the three clients cannot drift apart. Here it runs through the remote
// backend, a Go client of the same HTTP API.

const scenarioFile = "../../clients/scenario/scenario.json"

type scenarioDoc struct {
	Format    int        `json:"format"`
	About     string     `json:"about"`
	Scenarios []scenario `json:"scenarios"`
}

type scenario struct {
	Name  string         `json:"name"`
	Steps []scenarioStep `json:"steps"`
}

type scenarioStep struct {
	Op     string            `json:"op"`
	As     string            `json:"as"`
	Args   map[string]any    `json:"args"`
	Expect *scenarioExpect   `json:"expect"`
	Save   map[string]string `json:"save"`
}

type scenarioExpect struct {
	OK     any            `json:"ok"`
	Error  string         `json:"error"`
	Fields map[string]any `json:"fields"`
}

func loadScenarios(t *testing.T) scenarioDoc {
	t.Helper()
	b, err := os.ReadFile(scenarioFile)
	require.NoError(t, err)
	var doc scenarioDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&doc), "the scenario file is well-formed")
	require.Equal(t, 1, doc.Format)
	require.NotEmpty(t, doc.Scenarios)
	return doc
}

// TestScenarioFileOnFreshWorkspaces runs each scenario on a fresh store
// behind its own server, as the format promises a runner may.
func TestScenarioFileOnFreshWorkspaces(t *testing.T) {
	doc := loadScenarios(t)
	for _, sc := range doc.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			ws := openRemote(t, serve(t, sqliteDSN(t), false, server.Options{}))
			runScenario(t, ws, sc)
		})
	}
}

// TestScenarioFileInOneWorkspace runs every scenario in order on one
// store, as the Python and TypeScript tests do against one wsctl serve:
// the file keeps its scenarios' names, keys and claims apart.
func TestScenarioFileInOneWorkspace(t *testing.T) {
	doc := loadScenarios(t)
	ws := openRemote(t, serve(t, sqliteDSN(t), true, server.Options{}))
	for _, sc := range doc.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, ws, sc) })
	}
}

// TestScenarioFilePostgres runs them in order on one PostgreSQL store.
func TestScenarioFilePostgres(t *testing.T) {
	doc := loadScenarios(t)
	ws := openRemote(t, serve(t, pgtest.NewDSN(t), false, server.Options{}))
	for _, sc := range doc.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, ws, sc) })
	}
}

func openRemote(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func runScenario(t *testing.T, ws *workspace.Workspace, sc scenario) {
	t.Helper()
	vars := map[string]any{}
	for i, st := range sc.Steps {
		where := fmt.Sprintf("step %d (%s as %s)", i+1, st.Op, st.As)
		args, err := substitute(st.Args, vars)
		require.NoError(t, err, where)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := runStep(ctx, ws, st.Op, st.As, args.(map[string]any))
		cancel()
		want := st.Expect
		if want == nil {
			want = &scenarioExpect{}
		}
		if want.Error != "" {
			require.Error(t, err, "%s: want error %s, got %v", where, want.Error, got)
			code, fields := errorCode(err)
			require.Equal(t, want.Error, code, "%s: %v", where, err)
			if want.Fields != nil {
				require.NoError(t, match("fields", want.Fields, fields, vars), "%s: %v", where, err)
			}
			continue
		}
		require.NoError(t, err, where)
		if want.OK != nil {
			require.NoError(t, match("ok", want.OK, got, vars), "%s: got %v", where, got)
		}
		for name, path := range st.Save {
			v, err := lookup(got, path)
			require.NoError(t, err, "%s: save %s", where, name)
			vars[name] = v
		}
	}
}

// substitute replaces every string "$name" in v by the saved value.
func substitute(v any, vars map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if name, ok := strings.CutPrefix(x, "$"); ok {
			val, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("no saved value %q", name)
			}
			return val, nil
		}
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, err := substitute(e, vars)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := substitute(e, vars)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case nil:
		return map[string]any{}, nil
	}
	return v, nil
}

// match checks got against want: an object's keys are a subset, a list
// matches element by element at the same length, {"$gt": x} wants a
// number above x, and anything else wants equality.
func match(path string, want, got any, vars map[string]any) error {
	want, err := substitute(want, vars)
	if err != nil {
		return err
	}
	switch w := want.(type) {
	case map[string]any:
		if gt, ok := w["$gt"]; ok && len(w) == 1 {
			g, ok1 := got.(float64)
			b, ok2 := gt.(float64)
			if !ok1 || !ok2 || g <= b {
				return fmt.Errorf("%s: want a number above %v, got %v", path, gt, got)
			}
			return nil
		}
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := match(path+"."+k, w[k], gv, vars); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %d items, got %v", path, len(w), got)
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s.%d", path, i), w[i], g[i], vars); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %v, got %v", path, want, got)
	}
	return nil
}

// lookup follows a dotted path ("events.1.seq") into a result.
func lookup(v any, path string) (any, error) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[part]
			if !ok {
				return nil, fmt.Errorf("no %q in %v", part, x)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no item %q in a list of %d", part, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("cannot look up %q in %v", part, v)
		}
	}
	return v, nil
}

// stepArgs holds every argument a step may take, under its wire name.
type stepArgs struct {
	Ref            string            `json:"ref"`
	By             string            `json:"by"`
	Name           string            `json:"name"`
	Kind           *string           `json:"kind"`
	Content        *string           `json:"content"`
	ContentType    *string           `json:"content_type"`
	Labels         map[string]string `json:"labels"`
	TaskID         *string           `json:"task_id"`
	Version        int64             `json:"version"`
	To             int64             `json:"to"`
	IfVersion      int64             `json:"if_version"`
	Fence          int64             `json:"fence"`
	Message        string            `json:"message"`
	IdempotencyKey string            `json:"idempotency_key"`

	ID          string                `json:"id"`
	Title       *string               `json:"title"`
	Description *string               `json:"description"`
	ParentID    string                `json:"parent_id"`
	DependsOn   []string              `json:"depends_on"`
	Priority    *int                  `json:"priority"`
	Assignee    *string               `json:"assignee"`
	Status      *workspace.TaskStatus `json:"status"`
	Summary     string                `json:"summary"`
	Artifacts   []string              `json:"artifacts"`
	Lease       float64               `json:"lease"`
	Wait        float64               `json:"wait"`

	Key  string `json:"key"`
	Body string `json:"body"`

	Resource string  `json:"resource"`
	TTL      float64 `json:"ttl"`
	Token    int64   `json:"token"`

	After       int64    `json:"after"`
	Types       []string `json:"types"`
	Actor       string   `json:"actor"`
	SubjectKind string   `json:"subject_kind"`
	SubjectID   string   `json:"subject_id"`
	SubjectName string   `json:"subject_name"`
	Limit       int      `json:"limit"`
	Count       int      `json:"count"`
	NamePrefix  string   `json:"name_prefix"`
	Owner       string   `json:"owner"`

	Ops     []wire.OpBody `json:"ops"`
	Seconds float64       `json:"seconds"`
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

func (a stepArgs) ref() workspace.ArtifactRef {
	if a.By == "id" {
		return workspace.ArtifactRef{ID: a.Ref, Version: a.Version}
	}
	return workspace.ArtifactRef{Name: a.Ref, Version: a.Version}
}

func (a stepArgs) content() []byte {
	if a.Content == nil {
		return nil
	}
	return []byte(*a.Content)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// runStep makes the step's call through ws and returns its result in the
// wire's JSON shape (a generic value), or its error.
func runStep(ctx context.Context, ws *workspace.Workspace, op, actor string, raw map[string]any) (any, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var a stepArgs
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("scenario args of %s: %w", op, err)
	}
	w := workspace.Write{Actor: actor, IfVersion: a.IfVersion, Fence: a.Fence, Message: a.Message, IdempotencyKey: a.IdempotencyKey}
	var out any
	switch op {
	case "create_artifact":
		out, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: a.Name, Kind: deref(a.Kind), Content: a.content(), ContentType: deref(a.ContentType), Labels: a.Labels, TaskID: deref(a.TaskID)})
	case "get_artifact":
		out, err = ws.Artifacts().Get(ctx, a.ref())
	case "update_artifact":
		out, err = ws.Artifacts().Update(ctx, w, a.ref(), workspace.ArtifactChange{Content: a.content(), Kind: a.Kind, ContentType: a.ContentType, TaskID: a.TaskID, Labels: a.Labels})
	case "delete_artifact":
		err = ws.Artifacts().Delete(ctx, w, a.ref())
	case "rollback_artifact":
		out, err = ws.Artifacts().Rollback(ctx, w, a.ref(), a.To)
	case "artifact_versions":
		var vs []workspace.Artifact
		vs, err = ws.Artifacts().Versions(ctx, a.ref())
		out = map[string]any{"versions": vs}
	case "list_artifacts":
		out, err = ws.Artifacts().List(ctx, workspace.ArtifactFilter{Kind: deref(a.Kind), Owner: a.Owner, NamePrefix: a.NamePrefix, TaskID: deref(a.TaskID), Labels: a.Labels, Limit: a.Limit})
	case "create_task":
		out, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: deref(a.Title), Description: deref(a.Description), ParentID: a.ParentID, DependsOn: a.DependsOn, Priority: deref(a.Priority), Labels: a.Labels, Assignee: deref(a.Assignee)})
	case "get_task":
		out, err = ws.Tasks().Get(ctx, a.ID)
	case "update_task":
		out, err = ws.Tasks().Update(ctx, w, a.ID, workspace.TaskChange{Status: a.Status, Title: a.Title, Description: a.Description, Assignee: a.Assignee, Priority: a.Priority, Labels: a.Labels})
	case "list_tasks":
		out, err = ws.Tasks().List(ctx, workspace.TaskFilter{Status: deref(a.Status), Assignee: deref(a.Assignee), ParentID: a.ParentID, Labels: a.Labels, Limit: a.Limit})
	case "claim_task":
		req := workspace.ClaimRequest{Actor: actor, Lease: seconds(a.Lease), Labels: a.Labels, ParentID: a.ParentID}
		if a.Wait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, seconds(a.Wait))
			defer cancel()
			req.Wait = true
		}
		out, err = ws.Tasks().Claim(ctx, req)
	case "heartbeat_task":
		out, err = ws.Tasks().Heartbeat(ctx, w, a.ID, seconds(a.Lease))
	case "complete_task":
		out, err = ws.Tasks().Complete(ctx, w, a.ID, workspace.TaskResult{Summary: a.Summary, Artifacts: a.Artifacts})
	case "fail_task":
		out, err = ws.Tasks().Fail(ctx, w, a.ID, workspace.TaskResult{Summary: a.Summary, Artifacts: a.Artifacts})
	case "release_task":
		out, err = ws.Tasks().Release(ctx, w, a.ID)
	case "put_note":
		out, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: deref(a.Kind), Key: a.Key, Title: deref(a.Title), Body: a.Body})
	case "get_note":
		out, err = ws.Notes().Get(ctx, deref(a.Kind), a.Key)
	case "delete_note":
		err = ws.Notes().Delete(ctx, w, deref(a.Kind), a.Key)
	case "list_notes":
		out, err = ws.Notes().List(ctx, workspace.NoteFilter{Kind: deref(a.Kind), Limit: a.Limit})
	case "acquire_lock":
		req := workspace.AcquireRequest{Resource: a.Resource, Owner: actor, TTL: seconds(a.TTL), Message: a.Message}
		if a.Wait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, seconds(a.Wait))
			defer cancel()
			req.Wait = true
		}
		out, err = ws.Locks().Acquire(ctx, req)
	case "renew_lock":
		out, err = ws.Locks().Renew(ctx, workspace.Lease{Resource: a.Resource, Owner: actor, Token: a.Token}, seconds(a.TTL))
	case "release_lock":
		err = ws.Locks().Release(ctx, workspace.Lease{Resource: a.Resource, Owner: actor, Token: a.Token})
	case "force_release_lock":
		err = ws.Locks().ForceRelease(ctx, w, a.Resource)
	case "get_lock":
		out, err = ws.Locks().Get(ctx, a.Resource)
	case "list_locks":
		var ls []workspace.Lease
		ls, err = ws.Locks().List(ctx)
		out = map[string]any{"locks": ls}
	case "commit":
		out, err = commitStep(ctx, ws, actor, a)
	case "events_head":
		var h int64
		h, err = ws.Events().Head(ctx)
		out = map[string]any{"head": h}
	case "read_events":
		out, err = ws.Events().Read(ctx, a.eventQuery())
	case "follow":
		out, err = followStep(ctx, ws, a)
	case "sleep":
		time.Sleep(seconds(a.Seconds))
	default:
		return nil, fmt.Errorf("scenario: unknown op %q", op)
	}
	if err != nil {
		return nil, err
	}
	if out == nil {
		return map[string]any{}, nil
	}
	b, err = json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var generic any
	return generic, json.Unmarshal(b, &generic)
}

func (a stepArgs) eventQuery() workspace.EventQuery {
	return workspace.EventQuery{AfterSeq: a.After, Types: a.Types, Actor: a.Actor, SubjectKind: a.SubjectKind, SubjectID: a.SubjectID, SubjectName: a.SubjectName, Limit: a.Limit}
}

// followStep subscribes after a.After, takes a.Count events and closes.
func followStep(ctx context.Context, ws *workspace.Workspace, a stepArgs) (any, error) {
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: a.eventQuery()})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	evs := []workspace.Event{}
	for len(evs) < a.Count {
		m, err := sub.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !m.Progress {
			evs = append(evs, m.Event)
		}
	}
	return map[string]any{"events": evs}, nil
}

// commitStep converts the ops, given in the HTTP API's batch shape.
func commitStep(ctx context.Context, ws *workspace.Workspace, actor string, a stepArgs) (any, error) {
	b := workspace.Batch{Actor: actor, IdempotencyKey: a.IdempotencyKey}
	for _, o := range a.Ops {
		// The scenario's ops are wire bodies: the op table decodes them.
		op, err := o.WorkspaceOp()
		if err != nil {
			return nil, fmt.Errorf("scenario: batch op %q: %w", o.Op, err)
		}
		b.Ops = append(b.Ops, op)
	}
	return ws.Commit(ctx, b)
}

// errorCode gives an error's problem code and typed fields under their
// wire names: what the Python and TypeScript clients' errors carry.
func errorCode(err error) (string, map[string]any) {
	f := map[string]any{}
	var (
		be  *workspace.BatchError
		ce  *workspace.ConflictError
		le  *workspace.LockedError
		sfe *workspace.StaleFenceError
		cpe *workspace.CompactedError
		ie  *workspace.InvalidError
		se  *wire.StatusError
	)
	if errors.As(err, &be) {
		f["batch_index"] = float64(be.Index)
	}
	switch {
	case errors.As(err, &ce):
		f["expected"], f["current"] = float64(ce.Expected), float64(ce.Current)
		f["subject"] = map[string]any{"kind": ce.Subject.Kind, "id": ce.Subject.ID, "name": ce.Subject.Name}
		return wire.CodeConflict, f
	case errors.As(err, &le):
		f["resource"], f["holder"], f["token"] = le.Resource, le.Holder, float64(le.Token)
		return wire.CodeLocked, f
	case errors.As(err, &sfe):
		f["resource"], f["fence"], f["newest"] = sfe.Resource, float64(sfe.Fence), float64(sfe.Newest)
		return wire.CodeStaleFence, f
	case errors.As(err, &cpe):
		f["requested"], f["floor"] = float64(cpe.Requested), float64(cpe.Floor)
		return wire.CodeCompacted, f
	case errors.As(err, &ie):
		f["field"], f["reason"] = ie.Field, ie.Reason
		if ie.TooLarge {
			return wire.CodeTooLarge, f
		}
		return wire.CodeInvalid, f
	case errors.As(err, &se):
		return se.Code, f
	}
	return "unexpected: " + err.Error(), f
}

// TestScenarioFileNamesOnlyKnownOps keeps the file inside the op set the
// README documents, so every language's runner knows each step.
func TestScenarioFileNamesOnlyKnownOps(t *testing.T) {
	doc := loadScenarios(t)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(scenarioFile), "README.md"))
	require.NoError(t, err)
	for _, sc := range doc.Scenarios {
		for i, st := range sc.Steps {
			require.Contains(t, string(b), "`"+st.Op+"`", "%s step %d: op %s is documented", sc.Name, i+1, st.Op)
			if st.Op != "sleep" {
				require.NotEmpty(t, st.As, "%s step %d names its actor", sc.Name, i+1)
			}
			if st.Expect != nil && st.Expect.Error != "" {
				require.Nil(t, st.Expect.OK, "%s step %d: ok or error, not both", sc.Name, i+1)
				require.Empty(t, st.Save, "%s step %d: nothing to save from an error", sc.Name, i+1)
			}
		}
	}
}
