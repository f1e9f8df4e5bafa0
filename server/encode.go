package server

import (
	"encoding/json"
	"io"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/workspace"
)

// jsonFormat is huma's JSON format, with a body that checks itself
// decoded by its own one pass (decode.go), and one shortcut on the way out: a
// workspace record or page is written as its MarshalJSON returns it. The
// encoder huma uses would call the same MarshalJSON and then scan its
// bytes again to check and compact them, which for an artifact is its
// whole content a second time.
//
// Invariant: every type listed in selfEncoded marshals with json.Marshal
// (workspace/types_json.go), whose output is valid, compact JSON with HTML
// escaped. For such bytes the encoder's pass (compact, HTML escaping off)
// is the identity, so writing them as they are gives the same answer.
var jsonFormat = huma.Format{
	Marshal: func(w io.Writer, v any) error {
		if b, ok, err := selfEncoded(v); ok {
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			_, err = w.Write(newline)
			return err
		}
		return huma.DefaultJSONFormat.Marshal(w, v)
	},
	Unmarshal: func(data []byte, v any) error {
		if d, ok := v.(oneDecoder); ok {
			d.decodeJSON(data)
			return nil
		}
		return json.Unmarshal(data, v)
	},
}

var newline = []byte{'\n'}

// selfEncoded returns v's JSON when v is one of the workspace's records or
// pages, which marshal themselves with json.Marshal; ok is false for
// anything else. Each case calls its method on the unboxed value: boxing
// an artifact again as a json.Marshaler would copy it to the heap.
func selfEncoded(v any) (b []byte, ok bool, err error) {
	switch x := v.(type) {
	case workspace.Artifact:
		b, err = x.MarshalJSON()
	case workspace.Task:
		b, err = x.MarshalJSON()
	case workspace.Note:
		b, err = x.MarshalJSON()
	case workspace.Lease:
		b, err = x.MarshalJSON()
	case workspace.Event:
		b, err = x.MarshalJSON()
	case workspace.ArtifactPage:
		b, err = x.MarshalJSON()
	case workspace.TaskPage:
		b, err = x.MarshalJSON()
	case workspace.NotePage:
		b, err = x.MarshalJSON()
	case workspace.EventPage:
		b, err = x.MarshalJSON()
	case workspace.Status:
		b, err = x.MarshalJSON()
	case workspace.BatchResult:
		b, err = x.MarshalJSON()
	default:
		return nil, false, nil
	}
	return b, true, err
}
