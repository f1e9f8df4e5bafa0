package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestJSONFormatWritesWhatHumasEncoderWrites checks the invariant of
// jsonFormat: for every self-encoded type the shortcut's bytes are huma's
// default encoder's, including HTML characters, binary content and empty
// collections.
func TestJSONFormatWritesWhatHumasEncoderWrites(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 5, time.FixedZone("x", 3600))
	art := workspace.Artifact{ID: "a1", Name: "<b>&x</b>", Version: 3, Labels: map[string]string{"k": "<v>"}, Content: []byte("<script>\u2028 & é"), CreatedAt: at, UpdatedAt: at}
	bin := art
	bin.Content = []byte{0, 1, 2, 0xff}
	values := []any{
		art, bin, workspace.Artifact{},
		workspace.Task{ID: "t", Title: "a<b", Result: workspace.TaskResult{Summary: "&"}},
		workspace.Note{Kind: "k", Key: "<k>", Body: "&"},
		workspace.Lease{Resource: "r<", Owner: "h", Token: 4, ExpiresAt: at},
		workspace.Event{Seq: 9, Time: at, Type: "artifact.updated", Message: "<i>"},
		workspace.ArtifactPage{}, workspace.ArtifactPage{Artifacts: []workspace.Artifact{art}, Next: "n"},
		workspace.TaskPage{}, workspace.NotePage{}, workspace.EventPage{Head: 3},
		workspace.Status{}, workspace.BatchResult{},
	}
	for _, v := range values {
		var want, got bytes.Buffer
		require.NoError(t, huma.DefaultJSONFormat.Marshal(&want, v))
		_, ok, _ := selfEncoded(v)
		require.True(t, ok, "%T takes the shortcut", v)
		require.NoError(t, jsonFormat.Marshal(&got, v))
		assert.Equal(t, want.String(), got.String(), "%T", v)
	}
	var got bytes.Buffer
	require.NoError(t, jsonFormat.Marshal(&got, map[string]int{"a": 1}))
	assert.Equal(t, "{\"a\":1}\n", got.String(), "other values go through huma's encoder")
}

// TestAStreamedEventIsWhatJSONMarshalWrites checks the invariant the
// event stream relies on when it writes an event as its MarshalJSON
// returns it: the bytes are json.Marshal's of the event (HTML escaped,
// bad UTF-8 replaced, U+2028 escaped).
func TestAStreamedEventIsWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 5, time.FixedZone("x", 3600))
	for _, ev := range []workspace.Event{
		{},
		{Seq: 9, Time: at, Actor: "a&b", Type: "artifact.updated", Subject: workspace.Subject{Kind: "artifact", ID: "<id>", Name: "n\u2028"}, Version: 4, Message: "<i>\xff"},
	} {
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		got, err := ev.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
}
