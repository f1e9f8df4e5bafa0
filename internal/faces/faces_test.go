package faces_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/remote"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"

	// The owners of the reserved kinds. A kind is reserved in a process
	// that links its owner; every face (wsctl, the server) links them all,
	// and so does the Go API face here.
	_ "github.com/agentspace/agentspace/gitwork"
	_ "github.com/agentspace/agentspace/server"
	_ "github.com/agentspace/agentspace/shadow"
)

// The forbidden actions, each tried as bob, whose token has the role dev:
// dev writes src/** and decision notes, and has no admin right.
const (
	impersonate   = "write as another actor"
	headerActor   = "name another actor in the actor header"
	reservedWrite = "write a reserved note (a token record)"
	reservedRead  = "read a token record"
	adminOp       = "run an admin operation (gc)"
	outsideRole   = "write outside the role (docs/x.md, locks on docs/)"
	stopAgent     = "stop another agent (admin.tokens)"
	pauseAgent    = "pause another agent (admin.tokens)"
	resumeAgent   = "resume a paused agent (carol, paused by root; admin.tokens)"
	// stagedRead: read the change sets "staged" (open) and "promoted",
	// which root staged secret/** artifacts in, by get and in a listing;
	// dev reads every note kind but no artifact under secret/.
	stagedRead = "read a change set staging artifacts outside the role"
	// The actions of messages. alice's message is one root sent her that
	// needs her ack; carol is paused, and pausedWrite is tried as her.
	forgeSender = "send a message as another actor"
	readInbox   = "read another's inbox"
	ackOthers   = "ack another's message"
	policySend  = "send a message where the policy forbids (dev messages only root)"
	pausedWrite = "write while paused (as carol, paused by root)"
)

var actions = []string{impersonate, headerActor, reservedWrite, reservedRead, adminOp, outsideRole, stopAgent, pauseAgent, resumeAgent,
	stagedRead, forgeSender, readInbox, ackOthers, policySend, pausedWrite}

// stagedSecret is the content root stages as secret/k.txt; leaked reads
// show it base64-encoded (a change set's JSON).
const stagedSecret = "SECRET-K-CONTENT"

// stagedSets are the change sets root staged secret/** artifacts in.
var stagedSets = []string{"staged", "promoted"}

// leaks reports whether a listing's text shows a staged secret/** artifact.
func leaks(text string) bool {
	return strings.Contains(text, "secret/") || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(stagedSecret)))
}

// unconditional are the actions refused with no policy at all (the
// default): identity and the system's own records do not depend on roles,
// and stopping, pausing or resuming an agent needs an admin-role token
// (bob's role is dev).
var unconditional = []string{impersonate, headerActor, reservedWrite, reservedRead, stopAgent, pauseAgent, resumeAgent,
	forgeSender, readInbox, ackOthers, pausedWrite}

// asWho is who tries action: bob, or carol for the write of a paused agent.
func asWho(action string) string {
	if action == pausedWrite {
		return "carol"
	}
	return "bob"
}

// tokenFor is the token of asWho(action).
func (e *env) tokenFor(action string) string {
	if action == pausedWrite {
		return e.carolToken
	}
	return e.bobToken
}

const policyTOML = `
default_role = "observer"

[roles.observer]
artifacts_read = ["**"]
notes_read = ["*"]

[roles.dev]
artifacts_read = ["src/**", "docs/**", "public/**"]
artifacts_write = ["src/**"]
notes_read = ["*"]
notes_write = ["decision"]
tasks = ["add", "claim", "finish"]
locks = ["file:src/**"]
messages = ["root"]

[actors]
root = ["admin"]
`

// outcome is what a face did with one action.
type outcome int

const (
	refused outcome = iota // refused as forbidden (as paused, for pausedWrite)
	// inexpressible: the face has no way to ask for the action at all
	// (MCP tools take no actor and offer no gc); the driver proves it
	// (the tool list has no such tool or field), so it is as good as a refusal.
	inexpressible
	allowed
)

// env is the served workspace every face reaches.
type env struct {
	bin, store, url string
	bobToken        string
	carolToken      string
	aliceTokenID    string
	aliceMsg        string               // a message to alice that needs her ack
	ws              *workspace.Workspace // the store itself, in this process
}

// face drives one action as bob and says what came of it.
type face struct {
	name string
	do   func(t *testing.T, e *env, action string) (outcome, string)
}

func TestEveryFaceRefusesTheSameThings(t *testing.T) {
	t.Run("policy", func(t *testing.T) { everyFace(t, setUp(t, true), actions) })
	t.Run("no policy", func(t *testing.T) { everyFace(t, setUp(t, false), unconditional) })
}

func everyFace(t *testing.T, e *env, actions []string) {
	faces := []face{
		{"go api", goAPI},
		{"http", httpFace},
		{"remote client", remoteFace},
		{"cli", cliFace},
		{"mcp http", mcpHTTP},
		{"mcp stdio", mcpStdio},
		{"dashboard", dashboardFace},
	}
	ctx := context.Background()
	for _, f := range faces {
		for _, a := range actions {
			t.Run(f.name+"/"+a, func(t *testing.T) {
				before, err := e.ws.Events().Head(ctx)
				require.NoError(t, err)
				got, detail := f.do(t, e, a)
				assert.NotEqual(t, allowed, got, "%s let bob %s: %s", f.name, a, detail)
				evs, err := e.ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: before, Limit: 100})
				require.NoError(t, err)
				for _, ev := range evs.Events {
					assert.Equal(t, workspace.EventDenied, ev.Type, "%s: a refused action wrote %+v", f.name, ev)
				}
			})
		}
	}
	// What the token forgery of the report needed: a token note bob wrote.
	_, err := e.ws.Notes().List(ctx, workspace.NoteFilter{Kind: "token"})
	require.ErrorIs(t, err, workspace.ErrForbidden, "token records are sealed even in process")
}

func setUp(t *testing.T, withPolicy bool) *env {
	t.Helper()
	e := &env{bin: wsctltest.Binary(t)}
	dir := t.TempDir()
	e.store = "sqlite:" + filepath.Join(dir, "ws.db")
	wsctltest.Init(t, e.bin, e.store)
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(e.bin, append([]string{"--dsn", e.store}, args...)...) // #nosec G204 -- the test's own binary
		cmd.Env = wsctltest.Env()
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "wsctl %v: %s", args, errb.String())
		return out.String()
	}
	if withPolicy {
		run(policyTOML, "--as", "root", "artifact", "put", workspace.PolicyArtifact)
	}
	e.bobToken = strings.TrimSpace(run("", "--as", "root", "token", "create", "--actor", "bob", "--role", "dev"))
	require.Regexp(t, `^ast_`, e.bobToken)
	alice := strings.TrimSpace(run("", "--as", "root", "token", "create", "--actor", "alice", "--role", "dev"))
	e.aliceTokenID = regexp.MustCompile(`^ast_([^_]+)_`).FindStringSubmatch(alice)[1]
	run("", "--as", "root", "lock", "acquire", "file:docs/x", "--ttl", "1h")
	for _, set := range stagedSets {
		run("", "--as", "root", "changeset", "begin", set)
		run(stagedSecret, "--as", "root", "changeset", "create", set, "secret/"+set+".txt")
	}
	run("", "--as", "root", "changeset", "validate", "promoted")
	run("", "--as", "root", "changeset", "promote", "promoted")
	e.carolToken = strings.TrimSpace(run("", "--as", "root", "token", "create", "--actor", "carol", "--role", "dev"))

	ws, err := workspace.Open(context.Background(), e.store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	e.ws = ws
	ctx := context.Background()
	// alice writes once (so that she is a known recipient), root asks her
	// for an ack, and root pauses carol.
	_, err = ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"root"}, Body: "hello"})
	require.NoError(t, err)
	m, err := ws.Messages().Send(ctx, workspace.Write{Actor: "root"}, workspace.NewMsg{To: []string{"alice"}, Body: "ack this", RequiresAck: true})
	require.NoError(t, err)
	e.aliceMsg = m.ID
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "carol", Message: "hold on"}}})
	require.NoError(t, err)
	e.url = wsctltest.Serve(t, e.bin, e.store, "--require-token").URL
	return e
}

// classify maps an error of action to an outcome: a write while paused is
// refused as paused, anything else as forbidden.
func classify(action string, err error) (outcome, string) {
	if err == nil {
		return allowed, "no error"
	}
	if action == pausedWrite {
		if errors.Is(err, workspace.ErrPaused) {
			return refused, err.Error()
		}
		return allowed, "not refused as paused: " + err.Error()
	}
	// The MCP SDK says an HTTP 403 as its status text, "Forbidden".
	if strings.Contains(strings.ToLower(err.Error()), "forbidden") || strings.Contains(err.Error(), "403") {
		return refused, err.Error()
	}
	return allowed, "not a refusal: " + err.Error()
}

// goAPI: a program of ours acting for bob's token (as the server's faces
// do): a principal in the context.
func goAPI(t *testing.T, e *env, action string) (outcome, string) {
	if action == headerActor {
		return inexpressible, "a principal names one actor; there is no header beside it"
	}
	ctx := workspace.WithPrincipal(context.Background(), workspace.Principal{Actor: asWho(action), Roles: []string{"dev"}, Bound: true})
	return classify(action, apiDo(ctx, e, e.ws, action))
}

// apiDo runs action through a Workspace, as bob (whom ctx or the
// workspace's token names).
func apiDo(ctx context.Context, e *env, ws *workspace.Workspace, action string) error {
	bob := workspace.Write{Actor: "bob"}
	switch action {
	case impersonate:
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "alice"}, workspace.NotePut{Kind: "decision", Key: "forged", Body: "x"})
		return err
	case reservedWrite:
		_, err := ws.Notes().Put(ctx, bob, workspace.NotePut{Kind: "token", Key: "aaaaaaaaaaaaaaaa", Body: `{"actor":"root","role":"admin"}`})
		return err
	case reservedRead:
		_, err := ws.Notes().Get(ctx, "token", e.aliceTokenID)
		return err
	case adminOp:
		_, err := ws.GC(workspace.AsActor(ctx, "bob"), workspace.GCPolicy{Actor: "bob", KeepVersions: 1})
		if p, ok := wsconn.PrincipalFrom(ctx); ok {
			_, err = ws.GC(workspace.WithPrincipal(ctx, p), workspace.GCPolicy{Actor: "bob", KeepVersions: 1})
		}
		return err
	case outsideRole:
		_, err := ws.Artifacts().Create(ctx, bob, workspace.NewArtifact{Name: "docs/x.md", Content: []byte("x")})
		return err
	case stopAgent:
		_, err := ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{workspace.StopActorOp{Actor: "alice"}}})
		return err
	case pauseAgent:
		_, err := ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "alice"}}})
		return err
	case resumeAgent:
		_, err := ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "carol"}}})
		return err
	case stagedRead:
		var refusal error
		for _, set := range stagedSets {
			_, err := ws.Notes().Get(ctx, "changeset", set)
			if !errors.Is(err, workspace.ErrForbidden) {
				return fmt.Errorf("changeset/%s read: %v", set, err)
			}
			refusal = err
		}
		page, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: "changeset"})
		if err != nil {
			return err
		}
		for _, n := range page.Notes {
			if leaks(n.Body) {
				return fmt.Errorf("listed changeset/%s: %s", n.Key, n.Body)
			}
		}
		return refusal
	case forgeSender:
		_, err := ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"root"}, Body: "from alice, really"})
		return err
	case readInbox:
		_, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: "alice"})
		return err
	case ackOthers:
		_, err := ws.Messages().Ack(ctx, bob, e.aliceMsg, "")
		return err
	case policySend:
		_, err := ws.Messages().Send(ctx, bob, workspace.NewMsg{To: []string{"alice"}, Body: "psst"})
		return err
	case pausedWrite:
		_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "carol"}, workspace.NewArtifact{Name: "src/paused.go", Content: []byte("x")})
		return err
	}
	panic("unknown action " + action)
}

func remoteFace(t *testing.T, e *env, action string) (outcome, string) {
	if action == headerActor {
		return inexpressible, "with a token the remote client sends no actor header; a write names its actor in the body (the impersonation row)"
	}
	ws, err := workspace.Open(context.Background(), e.url+"?ws_token="+url.QueryEscape(e.tokenFor(action)))
	require.NoError(t, err)
	defer func() { _ = ws.Close() }()
	return classify(action, apiDo(context.Background(), e, ws, action))
}

func httpFace(t *testing.T, e *env, action string) (outcome, string) {
	if action == stagedRead {
		if _, body := bobGet(t, e, "/v1/notes?kind=changeset"); leaks(body) {
			return allowed, "GET /v1/notes?kind=changeset: " + body
		}
		for _, set := range stagedSets[1:] {
			if code, body := bobGet(t, e, "/v1/notes/changeset/"+set); code != http.StatusForbidden {
				return allowed, fmt.Sprintf("GET /v1/notes/changeset/%s: %d %s", set, code, body)
			}
		}
	}
	var method, path, body string
	var header []string
	switch action {
	case impersonate:
		method, path, body = "PUT", "/v1/notes/decision/forged", `{"actor":"alice","body":"x"}`
	case headerActor:
		method, path, body = "PUT", "/v1/notes/decision/forged", `{"body":"x"}`
		header = []string{"X-Agentspace-Actor", "alice"}
	case reservedWrite:
		method, path, body = "PUT", "/v1/notes/token/aaaaaaaaaaaaaaaa", `{"body":"{\"actor\":\"root\",\"role\":\"admin\"}"}`
	case reservedRead:
		method, path = "GET", "/v1/notes/token/"+e.aliceTokenID
	case adminOp:
		method, path, body = "POST", "/v1/admin/gc", `{"keep_versions":1}`
	case outsideRole:
		method, path, body = "POST", "/v1/artifacts", `{"name":"docs/x.md","content":"x"}`
	case stopAgent:
		method, path, body = "POST", "/v1/agents/alice/stop", `{}`
	case pauseAgent:
		method, path, body = "POST", "/v1/agents/alice/pause", `{}`
	case resumeAgent:
		method, path, body = "POST", "/v1/agents/carol/resume", `{}`
	case stagedRead:
		method, path = "GET", "/v1/notes/changeset/"+stagedSets[0]
	case forgeSender:
		// The body's actor is the impersonate row's shape; from is a message's own.
		if o, d := httpDo(t, e, action, "POST", "/v1/messages", `{"actor":"alice","to":["root"],"body":"x"}`); o != refused {
			return o, d
		}
		method, path, body = "POST", "/v1/messages", `{"from":"alice","to":["root"],"body":"x"}`
	case readInbox:
		if o, d := httpDo(t, e, action, "GET", "/v1/inbox/stream?actor=alice", ""); o != refused {
			return o, d
		}
		method, path = "GET", "/v1/inbox?actor=alice"
	case ackOthers:
		method, path, body = "POST", "/v1/messages/"+e.aliceMsg+"/ack", `{}`
	case policySend:
		method, path, body = "POST", "/v1/messages", `{"to":["alice"],"body":"psst"}`
	case pausedWrite:
		method, path, body = "POST", "/v1/artifacts", `{"name":"src/paused.go","content":"x"}`
	}
	return httpDo(t, e, action, method, path, body, header...)
}

// httpDo sends one request with the token of action's actor and says
// whether it was refused: 403 forbidden, or 423 paused for pausedWrite.
// header holds names and values of extra headers, in pairs.
func httpDo(t *testing.T, e *env, action, method, path, body string, header ...string) (outcome, string) {
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.tokenFor(action))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	_ = json.NewDecoder(res.Body).Decode(&p)
	if action == pausedWrite {
		if res.StatusCode == http.StatusLocked && p.Code == "paused" {
			return refused, p.Detail
		}
	} else if res.StatusCode == http.StatusForbidden && p.Code == "forbidden" {
		return refused, p.Detail
	}
	return allowed, fmt.Sprintf("%s %s: %d %s %s", method, path, res.StatusCode, p.Code, p.Detail)
}

// bobGet is a GET with bob's token: its status and body.
func bobGet(t *testing.T, e *env, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", e.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.bobToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	var b bytes.Buffer
	_, err = b.ReadFrom(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b.String()
}

func cliFace(t *testing.T, e *env, action string) (outcome, string) {
	if action == headerActor {
		return inexpressible, "the CLI sends --as in the body beside a token, never as a header (the impersonation row)"
	}
	if action == stagedRead {
		out, _ := cliRun(e, "", "note", "ls", "changeset", "--json")
		if leaks(out) {
			return allowed, "wsctl note ls changeset: " + out
		}
		for _, set := range stagedSets[1:] {
			if out, err := cliRun(e, "", "note", "get", "changeset", set); !exitedWith(err, 7) {
				return allowed, fmt.Sprintf("wsctl note get changeset %s: %v: %s", set, err, out)
			}
		}
	}
	var args []string
	switch action {
	case impersonate:
		args = []string{"--as", "alice", "note", "put", "decision", "forged", "--title", "t", "--body", "x"}
	case reservedWrite:
		args = []string{"note", "put", "token", "aaaaaaaaaaaaaaaa", "--title", "t", "--body", `{"actor":"root","role":"admin"}`}
	case reservedRead:
		args = []string{"note", "get", "token", e.aliceTokenID}
	case adminOp:
		args = []string{"gc", "--keep-versions", "1"}
	case outsideRole:
		args = []string{"artifact", "put", "docs/x.md"}
	case stopAgent:
		args = []string{"agent", "stop", "alice"}
	case pauseAgent:
		args = []string{"agent", "pause", "alice"}
	case resumeAgent:
		args = []string{"agent", "resume", "carol"}
	case stagedRead:
		args = []string{"note", "get", "changeset", stagedSets[0]}
	case forgeSender:
		args = []string{"--as", "alice", "send", "root", "-m", "from alice, really"}
	case readInbox:
		args = []string{"--as", "alice", "inbox"}
	case ackOthers:
		args = []string{"ack", e.aliceMsg}
	case policySend:
		args = []string{"send", "alice", "-m", "psst"}
	case pausedWrite:
		args = []string{"artifact", "put", "src/paused.go"}
	}
	out, err := cliRunAs(e, action, "x", args...)
	if action == pausedWrite {
		if exitedWith(err, 11) {
			return refused, out
		}
	} else if exitedWith(err, 7) {
		return refused, out
	}
	return allowed, fmt.Sprintf("wsctl %v: %v: %s", args, err, out)
}

// cliRun runs wsctl against the server as bob.
func cliRun(e *env, stdin string, args ...string) (string, error) {
	return cliRunAs(e, "", stdin, args...)
}

// cliRunAs is cliRun as who tries action (asWho), with its token.
func cliRunAs(e *env, action, stdin string, args ...string) (string, error) {
	cmd := exec.Command(e.bin, append([]string{"--dsn", e.url}, args...)...) // #nosec G204 -- the test's own binary
	cmd.Env = wsctltest.Env("AGENTSPACE_TOKEN="+e.tokenFor(action), "AGENTSPACE_ACTOR="+asWho(action))
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// exitedWith reports whether err is a process's exit with code.
func exitedWith(err error, code int) bool {
	var xe *exec.ExitError
	return errors.As(err, &xe) && xe.ExitCode() == code
}

// mcpDo runs action through an MCP session acting as bob.
func mcpDo(t *testing.T, cs *sdk.ClientSession, e *env, action string, canImpersonate bool) (outcome, string) {
	ctx := context.Background()
	call := func(name string, args map[string]any) (outcome, string) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return classify(action, err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text += tc.Text
			}
		}
		want := "forbidden"
		if action == pausedWrite {
			want = "paused"
		}
		if res.IsError && strings.Contains(text, want) {
			return refused, text
		}
		return allowed, fmt.Sprintf("%s: error=%v %s", name, res.IsError, text)
	}
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	switch action {
	case headerActor:
		return inexpressible, "an MCP tool call names no actor; over HTTP the header is refused before the session opens (mcpHTTP)"
	case impersonate:
		if canImpersonate {
			return call("note", map[string]any{"op": "put", "kind": "decision", "key": "forged", "body": "x"})
		}
		for _, tl := range tools.Tools {
			b, err := json.Marshal(tl.InputSchema)
			require.NoError(t, err)
			require.NotContains(t, string(b), `"actor"`, "tool %s takes an actor", tl.Name)
		}
		return inexpressible, "no tool takes an actor: a session acts as its token's"
	case reservedWrite:
		return call("note", map[string]any{"op": "put", "kind": "token", "key": "aaaaaaaaaaaaaaaa", "body": `{"actor":"root","role":"admin"}`})
	case reservedRead:
		if o, d := call("note", map[string]any{"op": "get", "kind": "token", "key": e.aliceTokenID}); o != refused {
			return o, d
		}
		return call("note", map[string]any{"op": "list", "kind": "token"})
	case adminOp:
		for _, tl := range tools.Tools {
			require.False(t, slices.Contains([]string{"gc", "verify", "export", "import", "token"}, tl.Name), "tool %s", tl.Name)
		}
		return inexpressible, "no admin tool"
	case outsideRole:
		return call("artifact_write", map[string]any{"name": "docs/x.md", "content": "x"})
	case stopAgent:
		return call("agents", map[string]any{"action": "stop", "agent": "alice"})
	case pauseAgent:
		return call("agents", map[string]any{"action": "pause", "agent": "alice"})
	case resumeAgent:
		return call("agents", map[string]any{"action": "resume", "agent": "carol"})
	case stagedRead:
		if o, d := call("note", map[string]any{"op": "list", "kind": "changeset"}); leaks(d) {
			return allowed, d
		} else if o != allowed {
			return o, d
		}
		for _, set := range stagedSets[1:] {
			if o, d := call("note", map[string]any{"op": "get", "kind": "changeset", "key": set}); o != refused {
				return o, d
			}
		}
		return call("note", map[string]any{"op": "get", "kind": "changeset", "key": stagedSets[0]})
	case forgeSender, readInbox:
		// The message and inbox tools take no actor: a session sends as,
		// and reads the inbox of, its own token's actor.
		for _, tl := range tools.Tools {
			if tl.Name != "message" && tl.Name != "inbox" {
				continue
			}
			b, err := json.Marshal(tl.InputSchema)
			require.NoError(t, err)
			for _, field := range []string{`"actor"`, `"from"`} {
				require.NotContains(t, string(b), field, "tool %s names someone", tl.Name)
			}
		}
		return inexpressible, "the message and inbox tools act as the session's actor only"
	case ackOthers:
		return call("message", map[string]any{"ack": e.aliceMsg})
	case policySend:
		return call("message", map[string]any{"to": []string{"alice"}, "body": "psst"})
	case pausedWrite:
		return call("artifact_write", map[string]any{"name": "src/paused.go", "content": "x"})
	}
	panic("unknown action " + action)
}

type bearer struct {
	token string
	actor string // an X-Agentspace-Actor to send beside the token ("": none)
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.actor != "" {
		r.Header.Set("X-Agentspace-Actor", b.actor)
	}
	return b.next.RoundTrip(r)
}

func mcpHTTP(t *testing.T, e *env, action string) (outcome, string) {
	b := bearer{token: e.tokenFor(action), next: http.DefaultTransport}
	if action == headerActor {
		b.actor = "alice"
	}
	tr := &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: b}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "faces", Version: "0"}, nil).Connect(context.Background(), tr, nil)
	if action == headerActor {
		if err != nil {
			return classify(action, err)
		}
		defer func() { _ = cs.Close() }()
		return mcpDo(t, cs, e, impersonate, true)
	}
	require.NoError(t, err)
	defer func() { _ = cs.Close() }()
	return mcpDo(t, cs, e, action, false)
}

// mcpStdio: `wsctl mcp` on the served workspace with bob's token; its
// --as names alice, so every write it makes tries to impersonate her.
func mcpStdio(t *testing.T, e *env, action string) (outcome, string) {
	as := asWho(action)
	if action == impersonate {
		as = "alice"
	}
	cmd := exec.Command(e.bin, "--dsn", e.url, "--as", as, "mcp") // #nosec G204 -- the test's own binary
	cmd.Env = wsctltest.Env("AGENTSPACE_TOKEN=" + e.tokenFor(action))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "faces", Version: "0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer func() { _ = cs.Close() }()
	return mcpDo(t, cs, e, action, true)
}

// dashboardFace: the dashboard's operator actions, posted with bob's token
// from the dashboard's own origin. Its writes are on locks, tasks and agents
// (a lock's release passes a pause); the rest, messages included, cannot
// be asked for there.
func dashboardFace(t *testing.T, e *env, action string) (outcome, string) {
	if action == headerActor {
		return inexpressible, "the dashboard reads no actor header: its pages read, and its actions write, as their token's actor"
	}
	if action == stagedRead {
		for _, p := range []string{"/ui/changes?all=1", "/ui/notes?kind=changeset"} {
			if _, body := bobGet(t, e, p); leaks(body) {
				return allowed, "GET " + p + " shows a secret/ artifact"
			}
		}
		for _, set := range stagedSets {
			if code, _ := bobGet(t, e, "/ui/changeset?name="+set); code != http.StatusForbidden {
				return allowed, fmt.Sprintf("GET /ui/changeset?name=%s: %d", set, code)
			}
		}
		return refused, "403"
	}
	if action == readInbox {
		// The agent page shows the engine's refusal where alice's inbox
		// would be, and her message's thread page does not show it.
		code, body := bobGet(t, e, "/ui/agent?actor=alice")
		if code != http.StatusOK || strings.Contains(body, "ack this") || !strings.Contains(body, `id="agent-inbox"`) {
			return allowed, fmt.Sprintf("GET /ui/agent?actor=alice: %d, inbox shown or no refusal", code)
		}
		if code, body := bobGet(t, e, "/ui/message?id="+e.aliceMsg); code == http.StatusOK || strings.Contains(body, "ack this") {
			return allowed, fmt.Sprintf("GET /ui/message?id=%s: %d", e.aliceMsg, code)
		}
		return refused, "the engine's refusal on the agent page; 404 for the thread"
	}
	routes := map[string]string{stopAgent: "stop", pauseAgent: "pause", resumeAgent: "resume"}
	if _, agent := routes[action]; action != outsideRole && !agent {
		for _, p := range []string{"/ui/notes?kind=token"} {
			req, err := http.NewRequest("GET", e.url+p, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+e.bobToken)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = res.Body.Close()
			if action == reservedRead {
				if res.StatusCode == http.StatusForbidden {
					return refused, p
				}
				return allowed, fmt.Sprintf("GET %s: %d", p, res.StatusCode)
			}
		}
		return inexpressible, "the dashboard has no action for it"
	}
	form, route := url.Values{"resource": {"file:docs/x"}}, "/ui/action/lock/release"
	if verb, ok := routes[action]; ok {
		who := "alice"
		if action == resumeAgent {
			who = "carol"
		}
		form, route = url.Values{"actor": {who}}, "/ui/action/agent/"+verb
	}
	req, err := http.NewRequest("POST", e.url+route, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.bobToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode == http.StatusForbidden {
		return refused, "403"
	}
	return allowed, fmt.Sprintf("POST %s: %d", route, res.StatusCode)
}
