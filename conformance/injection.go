package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// injection is one hostile string and where it is valid: as an artifact
// name, as a one-line field (actor, key, title, label, resource, prefix) and
// as multi-line text (description, note body, message). Content is bytes and
// always valid.
type injection struct {
	name              string
	s                 string
	asName, asKey, as bool
}

func injections() []injection {
	return []injection{
		{"sql drop table", "'; DROP TABLE tasks; --", true, true, true},
		{"sql or true", `x' OR '1'='1`, true, true, true},
		{"like percent", "%", true, true, true},
		{"like underscore", "_", true, true, true},
		{"like escape", "\\", false, true, true},
		{"like pattern", "a%_\\%", false, true, true},
		{"double quote", `"tasks"`, true, true, true},
		{"path traversal", "../../etc/passwd", false, true, true},
		{"inner traversal", "a/../../b", false, true, true},
		{"NUL", "a\x00b", false, false, false},
		{"invalid UTF-8", "a\xff\xfeb", false, false, false},
		// Format characters (Cf) display one name as another: refused on
		// one line, kept in text (emoji sequences join with U+200D).
		{"RTL override", "evil\u202etxt.exe", false, false, true},
		{"zero width space", "admin\u200b", false, false, true},
		{"fullwidth slash", "a\uff0f..\uff0fb", true, true, true},
		{"fullwidth dots", "\uff0e\uff0e/x", true, true, true},
		// Last: once a 1 MiB message or description is in the log, every
		// case's snapshot (Status, with its recent events) carries it until
		// newer events push it out, which through a server cost the cases
		// after it some 15 s.
		{"1 MiB", strings.Repeat("n", 1<<20), false, false, true},
	}
}

// injCall is one API call made with the hostile string s in one field. It
// returns a check of what the call stored, run only if the call succeeded.
type injCall struct {
	name  string
	field func(injection) bool
	do    func(ctx context.Context, ws *workspace.Workspace, i int, s string) (check func(t *testing.T), err error)
}

func asName(in injection) bool { return in.asName }
func asKey(in injection) bool  { return in.asKey }
func asText(in injection) bool { return in.as }
func always(injection) bool    { return true }

func injCalls(fx fixture) []injCall {
	art := func(i int) string { return fmt.Sprintf("inj/%02d", i) }
	return []injCall{
		{"artifact name", asName, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			_, err := ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: s, Content: []byte(s)})
			return func(t *testing.T) {
				got, err := ws.Artifacts().Get(ctx, workspace.ByName(s))
				require.NoError(t, err)
				assert.Equal(t, s, got.Name)
				assert.Equal(t, s, string(got.Content))
			}, err
		}},
		{"artifact content", always, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			a, err := ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: art(i) + "/content", Content: []byte(s)})
			return func(t *testing.T) {
				got, err := ws.Artifacts().Get(ctx, workspace.ByID(a.ID))
				require.NoError(t, err)
				assert.Equal(t, []byte(s), got.Content)
				assert.Equal(t, sha([]byte(s)), got.SHA256)
			}, err
		}},
		{"artifact labels", asKey, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			a, err := ws.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: art(i) + "/labels", Labels: map[string]string{s: s}})
			return func(t *testing.T) {
				page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Labels: map[string]string{s: s}})
				require.NoError(t, err)
				require.Len(t, page.Artifacts, 1, "a label matches itself only")
				assert.Equal(t, a.ID, page.Artifacts[0].ID)
				assert.Equal(t, map[string]string{s: s}, page.Artifacts[0].Labels)
			}, err
		}},
		{"actor and owner filter", asKey, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			a, err := ws.Artifacts().Create(ctx, as(s), workspace.NewArtifact{Name: art(i) + "/actor"})
			return func(t *testing.T) {
				page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Owner: s})
				require.NoError(t, err)
				require.Len(t, page.Artifacts, 1, "an owner matches itself only")
				assert.Equal(t, a.ID, page.Artifacts[0].ID)
				assert.Equal(t, s, page.Artifacts[0].CreatedBy)
				evs := readAll(t, ws, workspace.EventQuery{Actor: s})
				require.Len(t, evs, 1, "an actor filter matches itself only")
				assert.Equal(t, s, evs[0].Actor)
			}, err
		}},
		{"task fields", asKey, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			task, err := ws.Tasks().Create(ctx, as("bob"), workspace.NewTask{Title: s, Description: s, Assignee: s, Labels: map[string]string{s: s}})
			return func(t *testing.T) {
				got, err := ws.Tasks().Get(ctx, task.ID)
				require.NoError(t, err)
				assert.Equal(t, s, got.Title)
				assert.Equal(t, s, got.Description)
				assert.Equal(t, s, got.Assignee)
				assert.Equal(t, map[string]string{s: s}, got.Labels)
				page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Labels: map[string]string{s: s}})
				require.NoError(t, err)
				require.Len(t, page.Tasks, 1, "a task label matches itself only")
				page, err = ws.Tasks().List(ctx, workspace.TaskFilter{Assignee: s})
				require.NoError(t, err)
				require.Len(t, page.Tasks, 1, "an assignee matches itself only")
			}, err
		}},
		{"task id", func(injection) bool { return false }, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			_, err := ws.Tasks().Get(ctx, s)
			return nil, err
		}},
		{"note key and title", asKey, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			_, err := ws.Notes().Put(ctx, as("bob"), workspace.NotePut{Kind: "glossary", Key: s, Title: s, Body: s})
			return func(t *testing.T) {
				got, err := ws.Notes().Get(ctx, "glossary", s)
				require.NoError(t, err)
				assert.Equal(t, s, got.Key)
				assert.Equal(t, s, got.Title)
				assert.Equal(t, s, got.Body)
			}, err
		}},
		{"note kind", func(injection) bool { return false }, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			_, err := ws.Notes().Put(ctx, as("bob"), workspace.NotePut{Kind: s, Key: "k"})
			return nil, err
		}},
		{"lock resource and owner", asKey, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: s, Owner: s, TTL: time.Hour, Message: s})
			return func(t *testing.T) {
				got, err := ws.Locks().Get(ctx, s)
				require.NoError(t, err)
				assert.Equal(t, s, got.Resource)
				assert.Equal(t, s, got.Owner)
				assert.Equal(t, l.Token, got.Token)
				require.NoError(t, ws.Locks().Release(ctx, l))
			}, err
		}},
		{"claim filter", asKey, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			_, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: s, Labels: map[string]string{s + "-none": s}})
			if isAny(err, workspace.ErrNoTask) {
				err = nil // valid, and no task carries that label
			}
			return func(*testing.T) {}, err
		}},
		{"batch", asKey, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			_, err := ws.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "constraint", Key: fmt.Sprintf("batch-%d", i)}},
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "constraint", Key: s, Body: s}},
			}})
			return func(t *testing.T) {
				got, err := ws.Notes().Get(ctx, "constraint", s)
				require.NoError(t, err)
				assert.Equal(t, s, got.Body)
			}, err
		}},
		// The calls that store hostile text in the log (a write's message,
		// a task's description, a note's body) come last: after a 1 MiB
		// one, each case's snapshot (Status, with its recent events)
		// carries it.
		{"write message", asText, func(ctx context.Context, ws *workspace.Workspace, _ int, s string) (func(*testing.T), error) {
			a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "bob", Message: s}, workspace.ByID(fx.artifact.ID),
				workspace.ArtifactChange{Content: []byte("m")})
			return func(t *testing.T) {
				evs := readAll(t, ws, workspace.EventQuery{SubjectID: a.ID, Types: []string{"artifact.updated"}})
				require.NotEmpty(t, evs)
				assert.Equal(t, s, evs[len(evs)-1].Message)
			}, err
		}},
		{"task description", asText, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			task, err := ws.Tasks().Create(ctx, as("bob"), workspace.NewTask{Title: fmt.Sprintf("desc %d", i), Description: s})
			return func(t *testing.T) {
				got, err := ws.Tasks().Get(ctx, task.ID)
				require.NoError(t, err)
				assert.Equal(t, s, got.Description)
			}, err
		}},
		{"note body", asText, func(ctx context.Context, ws *workspace.Workspace, i int, s string) (func(*testing.T), error) {
			key := fmt.Sprintf("body-%d", i)
			_, err := ws.Notes().Put(ctx, as("bob"), workspace.NotePut{Kind: "decision", Key: key, Body: s})
			return func(t *testing.T) {
				got, err := ws.Notes().Get(ctx, "decision", key)
				require.NoError(t, err)
				assert.Equal(t, s, got.Body)
			}, err
		}},
	}
}

// testInjectionShapedInput: SQL metacharacters, path traversal, NUL, 1 MiB
// strings, invalid UTF-8 and unicode tricks, in every field of every call:
// each is either valid and stored exactly (LIKE wildcards and quotes mean
// nothing), or ErrInvalid with nothing written. Reads and filters with the
// same strings match literally.
func testInjectionShapedInput(t *testing.T, h Harness) {
	ws := open(t, h.NewDSN(t))
	fx := populate(t, ws)
	ctx := testCtx(t)
	calls := injCalls(fx)
	for i, in := range injections() {
		for _, c := range calls {
			t.Run(in.name+"/"+c.name, func(t *testing.T) {
				before := snap(t, ws)
				check, err := c.do(ctx, ws, i, in.s)
				if c.field(in) {
					require.NoError(t, err, "valid input is accepted")
					check(t)
					return
				}
				require.ErrorIs(t, err, workspace.ErrInvalid)
				assert.Equal(t, before, snap(t, ws), "nothing is written")
			})
		}
	}
	t.Run("reads and prefixes match literally", func(t *testing.T) {
		var all []string
		for f := (workspace.ArtifactFilter{Limit: 1000}); ; {
			page, err := ws.Artifacts().List(ctx, f)
			require.NoError(t, err)
			for _, a := range page.Artifacts {
				all = append(all, a.Name)
			}
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
		for _, in := range injections() {
			page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: in.s, Limit: 1000})
			_, gerr := ws.Artifacts().Get(ctx, workspace.ByName(in.s))
			evs, rerr := ws.Events().Read(ctx, workspace.EventQuery{SubjectName: in.s, Limit: 1000})
			if !in.asKey || len(in.s) > workspace.MaxNameLen {
				assert.ErrorIs(t, err, workspace.ErrInvalid, "%s: prefix", in.name)
				assert.ErrorIs(t, rerr, workspace.ErrInvalid, "%s: subject name", in.name)
				assert.ErrorIs(t, gerr, workspace.ErrInvalid, "%s: get", in.name)
				continue
			}
			require.NoError(t, err, in.name)
			require.NoError(t, rerr, in.name)
			var want, got []string
			for _, n := range all {
				if strings.HasPrefix(n, in.s) {
					want = append(want, n)
				}
			}
			for _, a := range page.Artifacts {
				got = append(got, a.Name)
			}
			assert.Equal(t, want, got, "%s: prefix %q is literal", in.name, in.s)
			for _, e := range evs.Events {
				assert.Equal(t, in.s, e.Subject.Name, "%s: subject name is exact", in.name)
			}
			if in.asName {
				assert.NoError(t, gerr, "%s: get by name", in.name)
			} else {
				assert.ErrorIs(t, gerr, workspace.ErrInvalid, "%s: get by an invalid name", in.name)
			}
		}
	})
}
