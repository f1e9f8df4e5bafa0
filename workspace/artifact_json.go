package workspace

import (
	"strconv"
	"time"

	"github.com/agentspace/agentspace/internal/jsonx"
)

// An artifact is the record agents write and read most: every update
// answers one, and every read of content returns one. Its JSON is written
// and read here by hand, not by encoding/json's reflection, which took
// about as much CPU per served write as the HTTP server's own parsing.
//
// Invariant: appendJSON writes exactly the bytes json.Marshal writes for
// the same artifactJSON, and readJSON, when it reports true, leaves
// exactly what json.Unmarshal leaves (FuzzArtifactJSON checks both). Where
// readJSON is unsure (a null, an unknown or differently cased key, a
// number with a fraction, anything malformed) it reports false and the
// caller decodes with encoding/json, which answers, errors included, as
// it always did; where a time cannot be written, appendJSON reports false
// and json.Marshal gives its error.

// sizeJSON is about how long the artifact's JSON is: enough that
// appendJSON does not grow its buffer for text without escapes.
func (w *artifactJSON) sizeJSON() int {
	n := 320 + len(w.ID) + len(w.Name) + len(w.Kind) + len(w.Owner) + len(w.ContentType) + len(w.SHA256) +
		len(w.TaskID) + len(w.CreatedBy) + len(w.UpdatedBy)
	for k, v := range w.Labels {
		n += len(k) + len(v) + 6
	}
	if w.Content != nil {
		n += len(*w.Content) + len(*w.Content)/16
	}
	return n
}

// appendJSON appends the artifact as json.Marshal writes it, or reports
// false when a time cannot be written (its year is outside 0-9999).
func (w *artifactJSON) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, w.ID)
	b = append(b, `,"name":`...)
	b = jsonx.AppendString(b, w.Name)
	b = append(b, `,"kind":`...)
	b = jsonx.AppendString(b, w.Kind)
	b = append(b, `,"owner":`...)
	b = jsonx.AppendString(b, w.Owner)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, w.Version, 10)
	b = append(b, `,"content_type":`...)
	b = jsonx.AppendString(b, w.ContentType)
	b = append(b, `,"sha256":`...)
	b = jsonx.AppendString(b, w.SHA256)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, w.Size, 10)
	b = append(b, `,"labels":`...)
	if w.Labels == nil {
		b = append(b, "null"...)
	} else {
		b = jsonx.AppendStringMap(b, w.Labels)
	}
	b = append(b, `,"task_id":`...)
	b = jsonx.AppendString(b, w.TaskID)
	var ok bool
	if b, ok = appendTime(b, `,"created_at":`, w.CreatedAt); !ok {
		return nil, false
	}
	b = append(b, `,"created_by":`...)
	b = jsonx.AppendString(b, w.CreatedBy)
	if b, ok = appendTime(b, `,"updated_at":`, w.UpdatedAt); !ok {
		return nil, false
	}
	b = append(b, `,"updated_by":`...)
	b = jsonx.AppendString(b, w.UpdatedBy)
	if w.Content != nil {
		b = append(b, `,"content":`...)
		b = jsonx.AppendString(b, *w.Content)
	}
	if w.ContentEncoding != "" {
		b = append(b, `,"content_encoding":`...)
		b = jsonx.AppendString(b, w.ContentEncoding)
	}
	return append(b, '}'), true
}

// appendTime appends key and t as an omitzero time field.
func appendTime(b []byte, key string, t time.Time) ([]byte, bool) {
	if t.IsZero() {
		return b, true
	}
	b = append(b, key...)
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, false
	}
	return append(b, '"'), true
}

// readJSON decodes b into w, which must be zero, and reports whether it
// could do so exactly as json.Unmarshal would; when it reports false, w
// holds a partial decoding to be thrown away.
func (w *artifactJSON) readJSON(b []byte) bool {
	r := jsonx.Reader{B: b}
	if !r.Delim('{') {
		return false
	}
	if r.Delim('}') {
		return r.End()
	}
	for {
		key, ok := r.Raw()
		if !ok || !r.Delim(':') || !w.readField(&r, string(key[1:len(key)-1])) {
			return false
		}
		if r.Delim('}') {
			return r.End()
		}
		if !r.Delim(',') {
			return false
		}
	}
}

// readField reads the value of the field key names.
func (w *artifactJSON) readField(r *jsonx.Reader, key string) bool {
	var s *string
	switch key {
	case "id":
		s = &w.ID
	case "name":
		s = &w.Name
	case "kind":
		s = &w.Kind
	case "owner":
		s = &w.Owner
	case "content_type":
		s = &w.ContentType
	case "sha256":
		s = &w.SHA256
	case "task_id":
		s = &w.TaskID
	case "created_by":
		s = &w.CreatedBy
	case "updated_by":
		s = &w.UpdatedBy
	case "content_encoding":
		s = &w.ContentEncoding
	case "content":
		v, ok := r.String()
		w.Content = &v
		return ok
	case "version":
		n, ok := r.Int64()
		w.Version = n
		return ok
	case "size":
		n, ok := r.Int64()
		w.Size = n
		return ok
	case "created_at":
		return readTime(r, &w.CreatedAt)
	case "updated_at":
		return readTime(r, &w.UpdatedAt)
	case "labels":
		return readLabels(r, &w.Labels)
	default:
		return false
	}
	v, ok := r.String()
	*s = v
	return ok
}

// readTime reads a time as time.Time's UnmarshalJSON does, given a string
// without escapes.
func readTime(r *jsonx.Reader, t *time.Time) bool {
	raw, ok := r.Raw()
	return ok && t.UnmarshalJSON(raw) == nil
}

// readLabels reads an object of strings into *m, adding to the map
// already there as encoding/json does when a key repeats; null makes *m
// nil, as it does there.
func readLabels(r *jsonx.Reader, m *map[string]string) bool {
	if r.Null() {
		*m = nil
		return true
	}
	if !r.Delim('{') {
		return false
	}
	if *m == nil {
		*m = map[string]string{}
	}
	if r.Delim('}') {
		return true
	}
	for {
		k, ok := r.String()
		if !ok || !r.Delim(':') {
			return false
		}
		v, ok := r.String()
		if !ok {
			return false
		}
		(*m)[k] = v
		if r.Delim('}') {
			return true
		}
		if !r.Delim(',') {
			return false
		}
	}
}
