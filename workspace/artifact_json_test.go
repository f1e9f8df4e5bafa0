package workspace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzArtifactJSON holds artifact_json.go's invariant: appendJSON writes
// json.Marshal's bytes, readJSON reads every artifact json.Marshal writes,
// and whatever readJSON accepts, json.Unmarshal reads the same.
func FuzzArtifactJSON(f *testing.F) {
	full := fullArtifact()
	seed, err := json.Marshal(artifactJSON{artifactFields: artifactFields(full), Content: new("# API\n"), ContentEncoding: "utf-8"})
	require.NoError(f, err)
	f.Add("id", "plans/<a>&b.md", "k", "o\u2028", int64(3), "text/\xffplain", "lk", "lv\n", "content\x00\"", t0.UnixNano(), int64(0), string(seed))
	f.Add("", "", "", "", int64(-1), "", "", "", "", int64(0), int64(-1), `{"id":"x","ID":"y"}`)
	f.Add("a", "b", "c", "d", int64(1<<62), "e", "", "", "", int64(1), int64(2), `{"labels":{"a":"1"},"labels":{"b":"2"},"version":1.0}`)
	f.Add("a", "b", "c", "d", int64(1), "e", "k", "v", "", int64(1), int64(2), ` { "content" : "\ud83d\ude00\u00e9" , "size" : -0 , "created_at":"2026-01-02T03:04:05.5+02:00" } `)
	f.Add("a", "b", "c", "d", int64(1), "e", "k", "v", "", int64(1), int64(2), `{"version":01,"content":null,"created_at":"2026-13-02T03:04:05Z"}`)
	f.Fuzz(func(t *testing.T, id, name, kind, owner string, version int64, ctype, lk, lv, content string, created, updated int64, input string) {
		w := artifactJSON{artifactFields: artifactFields{ID: id, Name: name, Kind: kind, Owner: owner, Version: version,
			ContentType: ctype, SHA256: id + name, Size: version / 3, TaskID: owner, CreatedBy: kind, UpdatedBy: name}}
		if lk != "" {
			w.Labels = map[string]string{lk: lv, lv: lk, "z" + lk: content}
		}
		if created != 0 {
			w.CreatedAt = time.Unix(0, created).UTC()
		}
		if updated != 0 {
			// Years outside 0-9999 cannot be written: both refuse them.
			w.UpdatedAt = time.Unix(updated, 0).UTC()
		}
		if content != "" {
			w.Content, w.ContentEncoding = &content, "utf-8"
		}
		want, wantErr := json.Marshal(w)
		got, ok := w.appendJSON(nil)
		if wantErr != nil {
			require.False(t, ok, "json.Marshal refuses it: %v", wantErr)
		} else {
			require.True(t, ok)
			require.Equal(t, string(want), string(got))
			var fast artifactJSON
			require.True(t, fast.readJSON(want), "readJSON reads what json.Marshal writes: %s", want)
			var slow artifactJSON
			require.NoError(t, json.Unmarshal(want, &slow))
			require.Equal(t, slow, fast)
		}

		var fast, slow artifactJSON
		if fast.readJSON([]byte(input)) {
			require.NoError(t, json.Unmarshal([]byte(input), &slow), "readJSON accepted what json.Unmarshal refuses: %s", input)
			require.Equal(t, slow, fast)
		}
	})
}

// TestArtifactJSONFallsBackToEncodingJSON checks that what readJSON
// leaves to encoding/json decodes, or fails, as before.
func TestArtifactJSONFallsBackToEncodingJSON(t *testing.T) {
	for in, want := range map[string]Artifact{
		`{"ID":"x","Version":2}`:                   {ID: "x", Version: 2},
		`{"id":"x","content":null,"future":[1,2]}`: {ID: "x"},
		`null`: {},
	} {
		var a Artifact
		require.NoError(t, a.UnmarshalJSON([]byte(in)), in)
		require.Equal(t, want, a, in)
	}
	for _, in := range []string{`{"version":1.5}`, `{"id":"x"} x`, `{"created_at":"yesterday"}`, `[`} {
		var a Artifact
		require.Error(t, a.UnmarshalJSON([]byte(in)), in)
	}
}

// BenchmarkArtifactJSON compares the hand-written codec with
// encoding/json's on an update's answer (no content) and a read's (1 KiB
// of text).
func BenchmarkArtifactJSON(b *testing.B) {
	meta := fullArtifact()
	meta.Content = nil
	read := fullArtifact()
	read.Content = []byte(strings.Repeat("line of text\n", 79))
	for _, c := range []struct {
		name string
		a    Artifact
	}{{"update", meta}, {"read", read}} {
		enc, err := c.a.MarshalJSON()
		require.NoError(b, err)
		b.Run(c.name+"/marshal/hand", func(b *testing.B) {
			for b.Loop() {
				_, _ = c.a.MarshalJSON()
			}
		})
		b.Run(c.name+"/marshal/encoding-json", func(b *testing.B) {
			for b.Loop() {
				w := artifactJSON{artifactFields: artifactFields(c.a)}
				if c.a.Content != nil {
					s := string(c.a.Content)
					w.Content, w.ContentEncoding = &s, "utf-8"
				}
				_, _ = json.Marshal(w)
			}
		})
		b.Run(c.name+"/unmarshal/hand", func(b *testing.B) {
			for b.Loop() {
				var a Artifact
				_ = a.UnmarshalJSON(enc)
			}
		})
		b.Run(c.name+"/unmarshal/encoding-json", func(b *testing.B) {
			for b.Loop() {
				var w artifactJSON
				_ = json.Unmarshal(enc, &w)
				_, _ = w.artifact()
			}
		})
	}
}
