package workspace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	t0 = time.Date(2026, 5, 1, 12, 30, 0, 123456000, time.UTC)
	t1 = t0.Add(90 * time.Second)
)

func fullSubject() Subject {
	return Subject{Kind: SubjectArtifact, ID: "0190b7c4-aaaa-7000-8000-000000000001", Name: "plans/api.md"}
}

func fullArtifact() Artifact {
	return Artifact{
		ID: "0190b7c4-aaaa-7000-8000-000000000001", Name: "plans/api.md", Kind: "plan", Owner: "alice", Version: 3,
		Content: []byte("# API\n"), ContentType: "text/markdown", SHA256: strings.Repeat("ab", 32), Size: 6,
		Labels: map[string]string{"area": "api"}, TaskID: "0190b7c4-bbbb-7000-8000-000000000002",
		CreatedAt: t0, CreatedBy: "alice", UpdatedAt: t1, UpdatedBy: "bob",
	}
}

func fullTask() Task {
	return Task{
		ID: "0190b7c4-bbbb-7000-8000-000000000002", Title: "build the API", Description: "all of it",
		Status: TaskInProgress, Assignee: "bob", ParentID: "0190b7c4-bbbb-7000-8000-000000000001",
		DependsOn: []string{"0190b7c4-bbbb-7000-8000-000000000001"}, Priority: 2,
		Labels: map[string]string{"area": "api"}, Result: TaskResult{Summary: "half", Artifacts: []string{"plans/api.md"}},
		Attempts: 1, LeaseExpiresAt: t1, Version: 2, CreatedAt: t0, CreatedBy: "alice", UpdatedAt: t1, UpdatedBy: "bob",
	}
}

func fullNote() Note {
	return Note{Kind: "decision", Key: "db", Title: "DB", Body: "sqlite", Author: "alice", Version: 2,
		CreatedAt: t0, UpdatedAt: t1, UpdatedBy: "bob"}
}

func fullLease() Lease {
	return Lease{Resource: "artifact:plans/api.md", Owner: "bob", Token: 7, AcquiredAt: t0, ExpiresAt: t1}
}

func fullEvent() Event {
	return Event{Seq: 42, Time: t0, Actor: "alice", Type: EventArtifactUpdated, Subject: fullSubject(), Version: 3, Message: "why"}
}

// fullSamples holds one value of every record type with every field set,
// keyed by the $defs name the schema gives it (the Go type's name).
func fullSamples() map[string]any {
	a, tk, n := fullArtifact(), fullTask(), fullNote()
	return map[string]any{
		"Subject":         fullSubject(),
		"Artifact":        fullArtifact(),
		"ArtifactPage":    ArtifactPage{Artifacts: []Artifact{fullArtifact()}, Next: "plans/api.md"},
		"TaskResult":      TaskResult{Summary: "done", Artifacts: []string{"plans/api.md"}},
		"Task":            fullTask(),
		"TaskPage":        TaskPage{Tasks: []Task{fullTask()}, Next: tk.ID},
		"Note":            fullNote(),
		"NotePage":        NotePage{Notes: []Note{fullNote()}, Next: "decision/db"},
		"Lease":           fullLease(),
		"Msg":             fullMsg(),
		"MsgAck":          fullMsg().Acks[0],
		"InboxPage":       InboxPage{Messages: []Msg{fullMsg()}, Next: fullMsg().ID, Cursor: fullMsg().ID, Unread: 1, Unacked: 1, Paused: true},
		"Event":           fullEvent(),
		"EventPage":       EventPage{Events: []Event{fullEvent()}, Next: 42, Head: 50},
		"Status":          Status{Head: 50, Floor: 1, Artifacts: 3, Notes: 2, Tasks: map[TaskStatus]int{TaskPending: 1, TaskInProgress: 1}, ActiveTasks: []Task{fullTask()}, Locks: []Lease{fullLease()}, RecentEvents: []Event{fullEvent()}},
		"OpResult":        OpResult{Task: &tk},
		"BatchResult":     BatchResult{Results: []OpResult{{Artifact: &a}, {Note: &n}, {}}, Events: []Event{fullEvent()}, Replayed: true},
		"Message":         Message{Event: fullEvent(), Head: 42},
		"ConflictError":   ConflictError{Subject: fullSubject(), Expected: 2, Current: 3},
		"LockedError":     LockedError{Resource: "role:lead", Holder: "alice", Token: 4, ExpiresAt: t1},
		"StaleFenceError": StaleFenceError{Resource: "artifact:plans/api.md", Fence: 3, Newest: 4},
		"CompactedError":  CompactedError{Requested: 1, Floor: 10},
		"InvalidError":    InvalidError{Field: "name", Reason: "is empty", TooLarge: true},
		"SchemaError":     SchemaError{Current: 1, Want: 2, Dirty: true},
		"ArchiveStats":    ArchiveStats{Tasks: 1, Notes: 2, Artifacts: 3, Versions: 4, DeletedArtifacts: 5, Leases: 6, Events: 7, ContentBytes: 8},
	}
}

type jsonCase struct {
	name string
	in   any // a value, not a pointer
	want any // what decoding gives back; nil: in itself
	json []string
}

// edgeCases are the values whose JSON is easy to get wrong, each with the
// fragments its JSON must hold.
func edgeCases() []jsonCase {
	binary := fullArtifact()
	binary.Content = []byte{0xff, 0xfe, 'a', 0}
	nul := fullArtifact()
	nul.Content = []byte("a\x00b")
	empty := fullArtifact()
	empty.Content = []byte{}
	meta := fullArtifact()
	meta.Content = nil
	bare := fullArtifact()
	bare.Content, bare.TaskID, bare.CreatedAt, bare.UpdatedAt = nil, "", time.Time{}, time.Time{}
	emptyLabels := fullArtifact()
	emptyLabels.Labels = map[string]string{}
	wantNilLabels := fullArtifact()
	wantNilLabels.Labels = nil
	local := fullNote()
	local.CreatedAt = t0.In(time.FixedZone("CEST", 2*3600))
	emptyTask := Task{Status: TaskPending, DependsOn: []string{}, Labels: map[string]string{}, Result: TaskResult{Artifacts: []string{}}}
	return []jsonCase{
		{name: "text content", in: fullArtifact(), json: []string{`"content":"# API\n"`, `"content_encoding":"utf-8"`}},
		{name: "binary content is base64", in: binary, json: []string{`"content":"//5hAA=="`, `"content_encoding":"base64"`}},
		{name: "content with NUL is base64", in: nul, json: []string{`"content":"YQBi"`, `"content_encoding":"base64"`}},
		{name: "empty content stays empty, not absent", in: empty, json: []string{`"content":""`, `"content_encoding":"utf-8"`}},
		{name: "metadata only has no content fields", in: meta, json: []string{`"updated_by":"bob"}`}},
		{name: "zero times are left out", in: bare, json: []string{`"task_id":"","created_by":"alice","updated_by":"bob"}`}},
		{name: "empty labels decode as nil", in: emptyLabels, want: wantNilLabels, json: []string{`"labels":{}`}},
		{name: "times are written in UTC", in: local, want: fullNote(), json: []string{`"created_at":"2026-05-01T12:30:00.123456Z"`}},
		{name: "task without lists", in: Task{Status: TaskPending}, json: []string{`"depends_on":[]`, `"labels":{}`, `"result":{"summary":"","artifacts":[]}`}},
		{name: "empty task lists decode as nil", in: emptyTask, want: Task{Status: TaskPending}, json: []string{`"depends_on":[]`}},
		{name: "zero status", in: Status{}, json: []string{`"tasks":{}`, `"active_tasks":[]`, `"locks":[]`, `"recent_events":[]`}},
		{name: "empty pages", in: EventPage{Events: []Event{}}, want: EventPage{}, json: []string{`"events":[]`}},
		{name: "zero artifact page", in: ArtifactPage{}, json: []string{`{"artifacts":[],"next":""}`}},
		{name: "zero task page", in: TaskPage{}, json: []string{`{"tasks":[],"next":""}`}},
		{name: "zero note page", in: NotePage{}, json: []string{`{"notes":[],"next":""}`}},
		{name: "zero batch result", in: BatchResult{}, json: []string{`{"results":[],"events":[],"replayed":false}`}},
		{name: "empty op result", in: OpResult{}, json: []string{`{}`}},
		{name: "heartbeat has no event", in: Message{Progress: true, Head: 9}, json: []string{`{"head":9,"progress":true}`}},
		{name: "lease released", in: Lease{Resource: "r", Token: 2}, json: []string{`{"resource":"r","owner":"","token":2}`}},
	}
}

// TestJSONRoundTrips checks Unmarshal(Marshal(x)) == x for every record
// type, full and at its edges, and that no JSON holds a null.
func TestJSONRoundTrips(t *testing.T) {
	cases := edgeCases()
	for name, v := range fullSamples() {
		cases = append(cases, jsonCase{name: "full " + name, in: v})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.in)
			require.NoError(t, err)
			assert.NotContains(t, string(b), "null")
			for _, frag := range c.json {
				assert.Contains(t, string(b), frag)
			}
			got := reflect.New(reflect.TypeOf(c.in))
			require.NoError(t, json.Unmarshal(b, got.Interface()), "%s", b)
			want := c.want
			if want == nil {
				want = c.in
			}
			assert.Equal(t, want, got.Elem().Interface(), "%s", b)
		})
	}
}

func TestArtifactJSONReadsEitherEncoding(t *testing.T) {
	cases := []struct {
		name    string
		json    string
		content []byte
		wantErr string
	}{
		{"utf-8", `{"content":"héllo","content_encoding":"utf-8"}`, []byte("héllo"), ""},
		{"no encoding means utf-8", `{"content":"héllo"}`, []byte("héllo"), ""},
		{"base64", `{"content":"aMOpbGxv","content_encoding":"base64"}`, []byte("héllo"), ""},
		{"empty base64", `{"content":"","content_encoding":"base64"}`, []byte{}, ""},
		{"no content", `{"name":"a"}`, nil, ""},
		{"unknown encoding", `{"content":"6869","content_encoding":"hex"}`, nil, `"hex" is neither`},
		{"bad base64", `{"content":"a!","content_encoding":"base64"}`, nil, "not base64"},
		{"encoding without content", `{"content_encoding":"base64"}`, nil, "without content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Artifact
			err := json.Unmarshal([]byte(c.json), &a)
			if c.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.content, a.Content)
		})
	}
}

func fullMsg() Msg {
	at := time.Date(2026, 12, 2, 9, 30, 0, 123456000, time.UTC)
	return Msg{ID: "0193a1b2-0000-7000-8000-000000000001", Thread: "0193a1b2-0000-7000-8000-000000000001",
		ReplyTo: "0193a1b2-0000-7000-8000-000000000000", From: "lead", To: []string{"worker-1", "role:reviewer"}, Each: true,
		Type: "question", Severity: SeverityWarning, Subject: "API shape", Body: "Which auth scheme?",
		Data: []byte(`{"task":"t1"}`), RequiresAck: true, Deadline: at.Add(time.Hour), EscalateTo: []string{"role:admin"},
		Pending: []string{"role:reviewer"}, Acks: []MsgAck{{By: "worker-1", For: "worker-1", At: at, Reply: "bearer"}},
		EscalatedAt: at.Add(2 * time.Hour), Version: 3, SentAt: at}
}
