package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/internal/jsonx"
	"github.com/agentspace/agentspace/wire"
)

// Validate once. Huma checks a body against its schema by decoding it
// into generic maps, then decodes it again into the Go type: for an
// artifact update, which carries the content, that is the content parsed
// twice, each parse scanning it twice. The bodies of the writes agents
// send most, an artifact update and a note put, are instead checked to be
// JSON (json.Valid, which allocates nothing) and walked once, applying the
// checks their schemas state (changeBody and noteBody).
//
// Invariant: a body answers what huma's validation answered (the table of
// TestArtifactChangeBodyIsCheckedAsTheSchemaSays and
// TestNoteBodyIsCheckedAsTheSchemaSays were recorded from it):
// 400 for anything that is not one JSON value, checked before anything
// else; 422 for a value the schema refuses (not an object, an unknown
// property, a wrong type, an integer that is not a plain int64, a label
// that is not a string, a content_encoding outside its enum); null for an
// optional property is its absence; properties match case-insensitively,
// as encoding/json matches them; 415 for a content type that is not JSON.

// changeBody is the artifact update's body, decoded by decodeJSON and
// documented as wire.ArtifactChangeBody (registerWireTypes).
type changeBody struct {
	wire.ArtifactChangeBody
	decoded bool       // decodeJSON ran: the content type was JSON
	bad     *bodyError // the first thing the body got wrong
}

// oneDecoder is a body that decodes (and checks) itself in one pass;
// jsonFormat hands it the raw bytes.
type oneDecoder interface{ decodeJSON(data []byte) }

// bodyError is a refused body, with the status huma's validation gave it.
type bodyError struct {
	status int
	detail huma.ErrorDetail
}

func (e *bodyError) Error() string                  { return e.detail.Error() }
func (e *bodyError) GetStatus() int                 { return e.status }
func (e *bodyError) ErrorDetail() *huma.ErrorDetail { return &e.detail }

// Resolve reports what decodeJSON found (huma calls it once the body is
// read). A body decodeJSON never saw was refused by huma for its content
// type before reaching the format.
func (b *changeBody) Resolve(huma.Context) []error {
	return resolved(b.decoded, b.bad)
}

func resolved(decoded bool, bad *bodyError) []error {
	switch {
	case bad != nil:
		return []error{bad}
	case !decoded:
		return []error{&bodyError{status: http.StatusUnsupportedMediaType, detail: huma.ErrorDetail{Location: "body", Message: "the content type is not JSON"}}}
	}
	return nil
}

// changeFields are the body's properties, as the schema names them.
var changeFields = append([]string{"kind", "content_type", "owner", "task_id", "labels", "content", "content_encoding"}, writeFields...)

func (b *changeBody) decodeJSON(data []byte) {
	b.decoded = true
	b.bad = walk(data, changeFields, b.set)
}

// walk checks that data is one JSON value (400 with encoding/json's own
// words if not) and walks it as an object of names with set.
func walk(data []byte, names []string, set func(d *oneDecode, field, key string, v tok)) *bodyError {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errNotJSON
		}
		return &bodyError{status: http.StatusBadRequest, detail: huma.ErrorDetail{Location: "body", Message: err.Error()}}
	}
	d := &oneDecode{b: data}
	d.body(names, set)
	return d.schema
}

var errNotJSON = errors.New("the body is not one JSON value")

// oneDecode walks the tokens of a body json.Valid accepted (so every
// token is well formed and the walk never runs past the one value),
// keeping the first thing the schema refuses (422).
type oneDecode struct {
	b      []byte
	i      int
	schema *bodyError
}

// tok is one token of the body. It is a value, not a json.Token: boxing
// each string and number in an interface was an allocation per token.
type tok struct {
	kind byte   // '{', '}', '[', ']', '"' a string, '0' a number, 't', 'f', 'n' null; 0 past the end
	esc  bool   // a string with an escape
	raw  []byte // a string's literal (quotes included) or a number's
}

func (t tok) delim(c byte) bool { return t.kind == c }

// token returns the next token (json.Decoder.Token's, with UseNumber);
// commas and colons are skipped.
func (d *oneDecode) token() tok {
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':':
			d.i++
		case '{', '}', '[', ']':
			d.i++
			return tok{kind: c}
		case '"':
			j, esc := d.i+1, false
			for d.b[j] != '"' {
				if d.b[j] == '\\' {
					esc = true
					j++
				}
				j++
			}
			t := tok{kind: '"', esc: esc, raw: d.b[d.i : j+1]}
			d.i = j + 1
			return t
		case 't':
			d.i += len("true")
			return tok{kind: 't'}
		case 'f':
			d.i += len("false")
			return tok{kind: 'f'}
		case 'n':
			d.i += len("null")
			return tok{kind: 'n'}
		default:
			j := d.i
			for j < len(d.b) && strings.IndexByte("+-.eE0123456789", d.b[j]) >= 0 {
				j++
			}
			t := tok{kind: '0', raw: d.b[d.i:j]}
			d.i = j
			return t
		}
	}
	return tok{}
}

// str returns the string a string token stands for, as encoding/json
// reads it (bad UTF-8 replaced): jsonx reads every literal json.Valid
// accepts, as json.Unmarshal does (FuzzString).
func (t tok) str() string {
	r := jsonx.Reader{B: t.raw}
	s, _ := r.String()
	return s
}

// name returns a property name to match against the schema's: for one
// without escapes and of valid UTF-8, a view of the body's own bytes (no
// copy; it must not outlive the walk, so a refusal that names it copies
// it: where).
func (t tok) name() string {
	if !t.esc && utf8.Valid(t.raw) {
		inner := t.raw[1 : len(t.raw)-1]
		if len(inner) == 0 {
			return ""
		}
		return unsafe.String(&inner[0], len(inner)) // #nosec G103 -- a read-only view, used only while the body is walked
	}
	return t.str()
}

// where is the location a refusal of property key names (a copy, never a
// view of the body).
func where(key string) string { return "body." + strings.Clone(truncate(key, 64)) }

func (d *oneDecode) refuse(loc, why string) {
	if d.schema == nil {
		d.schema = &bodyError{status: http.StatusUnprocessableEntity, detail: huma.ErrorDetail{Location: loc, Message: why}}
	}
}

// skip reads the rest of a value that began with t.
func (d *oneDecode) skip(t tok) {
	depth := 0
	for {
		switch t.kind {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth == 0 {
			return
		}
		t = d.token()
	}
}

// body walks one object, handing each property the schema names (matched
// case-insensitively, as encoding/json matches) to set.
func (d *oneDecode) body(names []string, set func(d *oneDecode, field, key string, v tok)) {
	if !d.token().delim('{') {
		d.refuse("body", "expected object")
		return
	}
	for {
		t := d.token()
		if t.delim('}') {
			return
		}
		key := t.name()
		field := ""
		for _, f := range names {
			if strings.EqualFold(f, key) {
				field = f
				break
			}
		}
		v := d.token()
		if field == "" {
			d.refuse(where(key), "unexpected property")
			d.skip(v)
			continue
		}
		set(d, field, key, v)
	}
}

// writeFields are wire.WriteFields' properties.
var writeFields = []string{"actor", "if_version", "fence", "message", "idempotency_key"}

// setWrite sets one of wire.WriteFields' properties; false if field is
// none of them.
func (d *oneDecode) setWrite(out *wire.WriteFields, field, key string, v tok) bool {
	switch field {
	case "if_version", "fence":
		if n, set := d.integer(key, v); set {
			if field == "fence" {
				out.Fence = n
			} else {
				out.IfVersion = n
			}
		}
		return true
	case "actor", "message", "idempotency_key":
		// As encoding/json does, null leaves a plain string as it was.
		if s, isNull, ok := d.str(key, v); ok && !isNull {
			switch field {
			case "actor":
				out.Actor = s
			case "message":
				out.Message = s
			default:
				out.IdempotencyKey = s
			}
		}
		return true
	}
	return false
}

func (b *changeBody) set(d *oneDecode, field, key string, v tok) {
	out := &b.ArtifactChangeBody
	if d.setWrite(&out.WriteFields, field, key, v) {
		return
	}
	if field == "labels" {
		d.labels(key, v, &out.Labels)
		return
	}
	s, isNull, ok := d.str(key, v)
	if !ok {
		return
	}
	// As encoding/json does, null empties a pointer and leaves a plain
	// string as it was.
	var p *string
	if !isNull {
		p = &s
	}
	switch field {
	case "kind":
		out.Kind = p
	case "content_type":
		out.ContentType = p
	case "owner":
		out.Owner = p
	case "task_id":
		out.TaskID = p
	case "content":
		out.Content.Content = p
	case "content_encoding":
		if isNull {
			return
		}
		if s != "utf-8" && s != "base64" {
			d.refuse(where(key), `expected value to be one of "utf-8, base64"`)
		}
		out.ContentEncoding = s
	}
}

// noteBody is a note put's body, decoded by decodeJSON and documented as
// wire.NoteBody (registerWireTypes).
type noteBody struct {
	wire.NoteBody
	decoded bool
	bad     *bodyError
}

// noteFields are wire.NoteBody's properties.
var noteFields = append([]string{"title", "body"}, writeFields...)

// Resolve reports what decodeJSON found, as changeBody's does.
func (b *noteBody) Resolve(huma.Context) []error {
	return resolved(b.decoded, b.bad)
}

func (b *noteBody) decodeJSON(data []byte) {
	b.decoded = true
	b.bad = walk(data, noteFields, b.set)
}

func (b *noteBody) set(d *oneDecode, field, key string, v tok) {
	out := &b.NoteBody
	if d.setWrite(&out.WriteFields, field, key, v) {
		return
	}
	if s, isNull, ok := d.str(key, v); ok && !isNull {
		if field == "title" {
			out.Title = s
		} else {
			out.Body = s
		}
	}
}

// str takes a string property's value; null is its absence.
func (d *oneDecode) str(key string, v tok) (s string, isNull, ok bool) {
	switch v.kind {
	case '"':
		return v.str(), false, true
	case 'n':
		return "", true, true
	}
	d.refuse(where(key), "expected string")
	d.skip(v)
	return "", false, false
}

// integer takes an int64 property's value: a plain integer literal in
// range (encoding/json refuses 1.0 and 1e3 for an int64). set is false
// for null, which leaves the field as it was, and for a refused value.
func (d *oneDecode) integer(key string, v tok) (n int64, set bool) {
	switch v.kind {
	case 'n':
		return 0, false
	case '0':
		if n, err := strconv.ParseInt(string(v.raw), 10, 64); err == nil {
			return n, true
		}
	}
	d.refuse(where(key), "expected integer")
	d.skip(v)
	return 0, false
}

// labels takes an object of strings into *out (a repeated property adds
// to the map, as encoding/json does); null is no labels.
func (d *oneDecode) labels(key string, v tok, out *map[string]string) {
	if v.kind == 'n' {
		*out = nil
		return
	}
	if !v.delim('{') {
		d.refuse(where(key), "expected object")
		d.skip(v)
		return
	}
	m := *out
	if m == nil {
		m = map[string]string{}
	}
	for {
		t := d.token()
		if t.delim('}') {
			*out = m
			return
		}
		k := t.str()
		val := d.token()
		if val.kind == '"' {
			m[k] = val.str()
			continue
		}
		d.refuse(where(key)+"."+truncate(k, 64), "expected string")
		d.skip(val)
	}
}
