package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestBadRequestsAreClear4xxAndWriteNothing sends malformed bodies, wrong
// content types, huge bodies and headers, and path tricks in names: each
// is a problem+json 4xx with a code, and the log does not move.
func TestBadRequestsAreClear4xxAndWriteNothing(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{MaxArtifactSize: 1024})
	e.ok(201, nil, "POST", "/v1/artifacts", map[string]any{"name": "keep", "content": "x"}, as, "ann")
	head := e.head()
	big := strings.Repeat("x", 3<<20)
	cases := []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		code               string
	}{
		{"truncated json", "POST", "/v1/artifacts", `{"name":`, nil, 400, wire.CodeInvalid},
		{"not json", "POST", "/v1/artifacts", `name=x`, nil, 400, wire.CodeInvalid},
		{"wrong field type", "POST", "/v1/artifacts", `{"name":5,"content":"x"}`, nil, 422, wire.CodeInvalid},
		{"unknown field", "POST", "/v1/artifacts", `{"name":"a","content":"x","bogus":1}`, nil, 422, wire.CodeInvalid},
		{"no body", "POST", "/v1/artifacts", nil, nil, 400, wire.CodeInvalid},
		{"wrong content type", "POST", "/v1/artifacts", `{"name":"a","content":"x"}`, []string{"Content-Type", "text/plain"}, 415, wire.CodeUnsupported},
		{"bad base64", "POST", "/v1/artifacts", `{"name":"a","content":"!!","content_encoding":"base64"}`, nil, 400, wire.CodeInvalid},
		{"bad encoding", "POST", "/v1/artifacts", `{"name":"a","content":"x","content_encoding":"rot13"}`, nil, 422, wire.CodeInvalid},
		{"body over the cap", "POST", "/v1/artifacts", `{"name":"a","content":"` + big + `"}`, nil, 413, wire.CodeTooLarge},
		{"huge header", "GET", "/v1/status", nil, []string{"X-Big", strings.Repeat("h", 2<<20)}, 431, ""},
		{"dot-dot name", "POST", "/v1/artifacts", `{"name":"../etc/passwd","content":"x"}`, nil, 400, wire.CodeInvalid},
		{"absolute name", "POST", "/v1/artifacts", `{"name":"/etc/passwd","content":"x"}`, nil, 400, wire.CodeInvalid},
		{"escaped dot-dot in the path", "PATCH", "/v1/artifacts/..%2F..%2Fkeep", `{"content":"y"}`, nil, 400, wire.CodeInvalid},
		{"NUL in a name", "POST", "/v1/artifacts", `{"name":"a\u0000b","content":"x"}`, nil, 400, wire.CodeInvalid},
		{"control character in a key", "PUT", "/v1/notes/decision/a%0Ab", `{"body":"x"}`, nil, 400, wire.CodeInvalid},
		{"bad kind", "PUT", "/v1/notes/Bad%20Kind/k", `{"body":"x"}`, nil, 400, wire.CodeInvalid},
		{"bad duration", "POST", "/v1/tasks/claim", `{"wait":"forever"}`, nil, 400, wire.CodeInvalid},
		{"negative duration", "POST", "/v1/locks/r/acquire", `{"ttl":"-1s"}`, nil, 400, wire.CodeInvalid},
		{"misspelt filter", "GET", "/v1/artifacts?lable=a=b", nil, nil, 422, wire.CodeInvalid},
		{"bad label query", "GET", "/v1/artifacts?label=novalue", nil, nil, 400, wire.CodeInvalid},
		{"misspelt stream filter", "GET", "/v1/events?typ=x", nil, nil, 400, wire.CodeInvalid},
		{"bad seq", "GET", "/v1/events?after=x", nil, nil, 400, wire.CodeInvalid},
		{"bad Last-Event-ID", "GET", "/v1/events", nil, []string{"Last-Event-ID", "-3"}, 400, wire.CodeInvalid},
		{"unknown batch op", "POST", "/v1/batch", `{"ops":[{"op":"drop_table"}]}`, nil, 422, wire.CodeInvalid},
		{"batch op invalid", "POST", "/v1/batch", `{"ops":[{"op":"create_artifact","name":"ok","content":"x"},{"op":"create_artifact","name":"..","content":"x"}]}`, nil, 400, wire.CodeInvalid},
		{"unknown route", "GET", "/v1/nothing", nil, nil, 404, wire.CodeNoRoute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := append([]string{as, "ann"}, c.hdr...)
			st, body := e.do(c.method, c.path, c.body, hdr...)
			require.Equal(t, c.status, st, "%s", body)
			if c.code != "" {
				err := wire.DecodeError(st, body)
				var se *wire.StatusError
				if errorsAs(err, &se) {
					assert.Equal(t, c.code, se.Code)
				}
				assert.Contains(t, string(body), `"code":"`+c.code+`"`)
				assert.Less(t, len(body), 4096, "the answer does not echo the body")
			}
			assert.Equal(t, head, e.head(), "nothing was written")
		})
	}
}

// FuzzRequestDecoding sends arbitrary bodies to the writing routes: no
// input makes the server fail (5xx) or panic.
func FuzzRequestDecoding(f *testing.F) {
	ws, err := workspace.Open(context.Background(), "sqlite:"+filepath.Join(f.TempDir(), "ws.db"))
	require.NoError(f, err)
	f.Cleanup(func() { _ = ws.Close() })
	s, err := server.New(ws, server.Options{MaxArtifactSize: 4096})
	require.NoError(f, err)
	routes := []string{"POST /v1/artifacts", "PATCH /v1/artifacts/a", "POST /v1/tasks", "POST /v1/tasks/claim", "PUT /v1/notes/k/n", "POST /v1/locks/r/acquire", "POST /v1/batch", "POST /v1/tasks/x/complete"}
	for _, seed := range []string{
		`{"name":"a","content":"x"}`, `{"title":"t"}`, `{"wait":"1ms"}`, `{"ttl":"1s"}`, `{"ops":[{"op":"create_task","title":"t"}]}`,
		`{"content":"AA==","content_encoding":"base64"}`, `{"labels":{"a":"b"}}`, `[]`, `null`, `{"name":"\u0000"}`,
	} {
		for i := range routes {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		method, path, _ := strings.Cut(routes[int(route)%len(routes)], " ")
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.ActorHeader, "fuzz")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		}
	})
}
