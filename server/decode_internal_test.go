package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/wire"
)

// TestOneDecodeAgreesWithEncodingJSON mutates update bodies byte by byte
// and truncates them: no input panics, and every body the one-pass decode
// accepts decodes with encoding/json into the very same value.
func TestOneDecodeAgreesWithEncodingJSON(t *testing.T) {
	seeds := []string{
		`{"content":"a\"b\\c\/d\u00e9\ud83d\ude00","content_encoding":"utf-8","if_version":12,"fence":-3}`,
		`{"kind":"k","content_type":"text/plain","owner":null,"task_id":"t","labels":{"a":"}],","b":""},"message":"m","idempotency_key":"i","actor":"x"}`,
		`{"Content":"y","LABELS":{"a":"b"},"labels":{"c":"d"},"IF_VERSION":7}`,
		"{\"content\":\"bad \xff\",\"kind\":null}",
		`{"content":"eQ==","content_encoding":"base64"}`,
	}
	mutations := []byte{'"', '\\', '{', '}', '[', ']', ',', ':', 'n', '1', '.', 'e', ' ', 0, 0xff}
	checked, accepted := 0, 0
	check := func(body []byte) {
		checked++
		var got changeBody
		require.NotPanics(t, func() { got.decodeJSON(body) }, "%q", body)
		if got.bad != nil {
			if !json.Valid(body) {
				assert.Equal(t, 400, got.bad.status, "%q", body)
			}
			return
		}
		accepted++
		var want wire.ArtifactChangeBody
		require.NoError(t, json.Unmarshal(body, &want), "%q was accepted", body)
		assert.Equal(t, want, got.ArtifactChangeBody, "%q", body)
	}
	notes := []string{
		`{"body":"a\"b","title":"t\u00e9","actor":"x","if_version":3,"fence":null,"message":"m","idempotency_key":"k"}`,
		`{"BODY":"y","Title":null,"body":"z"}`,
	}
	checkNote := func(body []byte) {
		checked++
		var got noteBody
		require.NotPanics(t, func() { got.decodeJSON(body) }, "%q", body)
		if got.bad != nil {
			return
		}
		accepted++
		var want wire.NoteBody
		require.NoError(t, json.Unmarshal(body, &want), "%q was accepted", body)
		assert.Equal(t, want, got.NoteBody, "%q", body)
	}
	for _, s := range notes {
		b := []byte(s)
		for i := range b {
			checkNote(b[:i])
			for _, m := range mutations {
				c := append([]byte(nil), b...)
				c[i] = m
				checkNote(c)
			}
		}
		checkNote(b)
	}
	for _, s := range seeds {
		b := []byte(s)
		for i := range b {
			check(b[:i])
			for _, m := range mutations {
				c := append([]byte(nil), b...)
				c[i] = m
				check(c)
			}
		}
		check(b)
	}
	t.Logf("%d bodies, %d accepted", checked, accepted)
	assert.Greater(t, accepted, len(seeds))
}
