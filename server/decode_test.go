package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestArtifactChangeBodyIsCheckedAsTheSchemaSays sends an artifact update
// every kind of body the schema refuses or accepts: each answer's status
// and code are what huma's schema validation gave before the body was
// decoded in one pass (the table was recorded from it).
func TestArtifactChangeBodyIsCheckedAsTheSchemaSays(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{MaxArtifactSize: 1024})
	e.ok(201, nil, "POST", "/v1/artifacts", map[string]any{"name": "keep", "content": "x"}, as, "ann")
	cases := []struct {
		body   string
		status int
	}{
		{`{"content":"y"}`, 200},
		{`{"content":"y","kind":"k","content_type":"text/plain","owner":"ann","task_id":"","labels":{"a":"b"},"message":"m","idempotency_key":"","actor":"ann"}`, 200},
		{` {"content" : "z\u00e9\n"} `, 200},
		{`{}`, 200},
		{`{"content":"y","content_encoding":"utf-8"}`, 200},
		{`{"content":"eQ==","content_encoding":"base64"}`, 200},
		{`{"if_version":999,"content":"y"}`, 409},
		{`{"fence":0,"content":"y"}`, 200},
		{`{"content":null}`, 200},
		{`{"kind":null}`, 200},
		{`{"labels":null}`, 200},
		{`{"fence":null}`, 200},
		{`{"labels":{"a":1}}`, 422},
		{`{"labels":{"a":{"b":"c"}}}`, 422},
		{`{"labels":[]}`, 422},
		{`{"labels":"a=b"}`, 422},
		{`{"if_version":"1"}`, 422},
		{`{"if_version":1.5}`, 422},
		{`{"if_version":1.0}`, 422},
		{`{"if_version":1e0}`, 422},
		{`{"if_version":99999999999999999999}`, 422},
		{`{"if_version":true}`, 422},
		{`{"content":5}`, 422},
		{`{"content":["y"]}`, 422},
		{`{"content":"y","content":5}`, 422},
		{`{"content":5,"content":"y"}`, 422},
		{`{"bogus":1}`, 422},
		{`{"Content":"y"}`, 200},
		{`{"labels":{"a":null}}`, 422},
		{`{"labels":{}}`, 200},
		{`{"kind":null,"kind":"x"}`, 200},
		{`{"IF_VERSION":999}`, 409},
		{`{"content":"y","bogus":null}`, 422},
		{`{"content_encoding":"rot13","content":"x"}`, 422},
		{`{"content_encoding":"base64","content":"!!"}`, 400},
		{`[]`, 422},
		{`"x"`, 422},
		{`null`, 422},
		{`1`, 422},
		{`{"content":"y"} x`, 400},
		{`{"content":"y"}{}`, 400},
		{`{"content":"y",}`, 400},
		{`{"content":"y"`, 400},
		{`{"content":'y'}`, 400},
		{`{"content":"\x"}`, 400},
		{"{\"content\":\"a\tb\"}", 400},
	}
	for _, c := range cases {
		st, body := e.do("PATCH", "/v1/artifacts/keep", c.body, as, "ann")
		require.Equal(t, c.status, st, "%s: %s", c.body, body)
		if st >= 400 && st != 409 {
			assert.Contains(t, string(body), `"code":"`+wire.CodeInvalid+`"`, "%s", c.body)
			assert.True(t, strings.HasPrefix(string(body), "{"), "%s", body)
		}
	}
	st, body := e.do("PATCH", "/v1/artifacts/keep", nil, as, "ann")
	assert.Equal(t, 400, st, "no body: %s", body)
	st, body = e.do("PATCH", "/v1/artifacts/keep", `{"content":"y"}`, as, "ann", "Content-Type", "text/plain")
	assert.Equal(t, 415, st, "not JSON: %s", body)
	assert.Contains(t, string(body), `"code":"`+wire.CodeUnsupported+`"`)
	st, body = e.do("PATCH", "/v1/artifacts/keep", `{"content":"y"}`, as, "ann", "Content-Type", "application/merge-patch+json; charset=utf-8")
	assert.Equal(t, 200, st, "a +json type is JSON: %s", body)
	var a workspace.Artifact
	for body, want := range map[string]string{
		`{"content":"a\"b\\c\/d\u00e9\ud83d\ude00\n"}`:  "a\"b\\c/d\u00e9\U0001F600\n",
		"{\"content\":\"bad \xff utf-8\"}":              "bad \ufffd utf-8",
		`{"bogus_free":1,"content":"x"}`:                "",
		`{"content":"y","labels":{"a":"b"},"kind":"k"}`: "y",
		`{"labels":{"a":"}],"},"content":"q"}`:          "q",
		"{\"content\":\"\xe2\x82\xac sign\"}":           "\u20ac sign",
	} {
		st, out := e.do("PATCH", "/v1/artifacts/keep", body, as, "ann")
		if want == "" {
			assert.Equal(t, 422, st, "%s: %s", body, out)
			continue
		}
		require.Equal(t, 200, st, "%s: %s", body, out)
		e.ok(200, &a, "GET", "/v1/artifacts/keep", nil, as, "ann")
		assert.Equal(t, want, string(a.Content), "%s", body)
	}
	st, body = e.do("PATCH", "/v1/artifacts/keep", `{"bogus":{"a":[1,{"b":"}"}],"c":"]"},"content":5}`, as, "ann")
	assert.Equal(t, 422, st, "nested values are skipped whole: %s", body)
	e.ok(200, &a, "PATCH", "/v1/artifacts/keep", `{"content":"new","kind":"doc","labels":{"k":"v"},"message":"why"}`, as, "ann")
	e.ok(200, &a, "GET", "/v1/artifacts/keep", nil, as, "ann")
	assert.Equal(t, "new", string(a.Content))
	assert.Equal(t, "doc", a.Kind)
	assert.Equal(t, map[string]string{"k": "v"}, a.Labels)
}

// TestNoteBodyIsCheckedAsTheSchemaSays is the same for a note put (the
// table was recorded from huma's validation).
func TestNoteBodyIsCheckedAsTheSchemaSays(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	cases := []struct {
		body   string
		status int
	}{
		{`{"body":"x"}`, 200},
		{`{"body":"x","title":"t","actor":"ann","message":"m","idempotency_key":"k1","if_version":0,"fence":0}`, 200},
		{`{}`, 200},
		{`{"body":null}`, 200},
		{`{"title":null}`, 200},
		{`{"body":5}`, 422},
		{`{"BODY":"y"}`, 200},
		{`{"body":"x","bogus":1}`, 422},
		{`{"body":"x","body":5}`, 422},
		{`{"if_version":1.0}`, 422},
		{`{"if_version":"1"}`, 422},
		{`{"if_version":999,"body":"z"}`, 409},
		{`null`, 422},
		{`[]`, 422},
		{`"x"`, 422},
		{`{"body":"x"} x`, 400},
		{`{"body":"x",}`, 400},
		{`{"labels":{}}`, 422},
		{`{"fence":null,"body":"q"}`, 200},
	}
	for _, c := range cases {
		st, body := e.do("PUT", "/v1/notes/decision/k", c.body, as, "ann")
		require.Equal(t, c.status, st, "%s: %s", c.body, body)
		if st >= 400 && st != 409 {
			assert.Contains(t, string(body), `"code":"`+wire.CodeInvalid+`"`, "%s", c.body)
		}
	}
	var n workspace.Note
	e.ok(200, &n, "GET", "/v1/notes/decision/k", nil, as, "ann")
	assert.Equal(t, "q", n.Body)
	st, body := e.do("PUT", "/v1/notes/decision/k", `{"body":"x"}`, as, "ann", "Content-Type", "text/plain")
	assert.Equal(t, 415, st, "not JSON: %s", body)
	st, body = e.do("PUT", "/v1/notes/decision/k", nil, as, "ann")
	assert.Equal(t, 400, st, "no body: %s", body)
}
