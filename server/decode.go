package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

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
func walk(data []byte, names []string, set func(d *oneDecode, field, where string, v json.Token)) *bodyError {
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

// token returns the next token as json.Decoder.Token would (with
// UseNumber); commas and colons are skipped.
func (d *oneDecode) token() json.Token {
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':':
			d.i++
		case '{', '}', '[', ']':
			d.i++
			return json.Delim(c)
		case '"':
			return d.literal()
		case 't':
			d.i += len("true")
			return true
		case 'f':
			d.i += len("false")
			return false
		case 'n':
			d.i += len("null")
			return nil
		default:
			j := d.i
			for j < len(d.b) && strings.IndexByte("+-.eE0123456789", d.b[j]) >= 0 {
				j++
			}
			n := json.Number(d.b[d.i:j])
			d.i = j
			return n
		}
	}
	return nil
}

// literal reads a string literal. One without escapes and of valid UTF-8 is
// its own bytes (what encoding/json returns for it); any other goes
// through encoding/json, which replaces bad UTF-8 as it always does.
func (d *oneDecode) literal() string {
	j, esc := d.i+1, false
	for d.b[j] != '"' {
		if d.b[j] == '\\' {
			esc = true
			j++
		}
		j++
	}
	raw := d.b[d.i : j+1]
	d.i = j + 1
	if !esc && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // a well-formed string literal: it cannot fail
	return s
}

func (d *oneDecode) refuse(where, why string) {
	if d.schema == nil {
		d.schema = &bodyError{status: http.StatusUnprocessableEntity, detail: huma.ErrorDetail{Location: where, Message: why}}
	}
}

// skip reads the rest of a value that began with t.
func (d *oneDecode) skip(t json.Token) {
	depth := 0
	for {
		if dl, ok := t.(json.Delim); ok {
			if dl == '{' || dl == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return
		}
		t = d.token()
	}
}

// body walks one object, handing each property the schema names (matched
// case-insensitively, as encoding/json matches) to set.
func (d *oneDecode) body(names []string, set func(d *oneDecode, field, where string, v json.Token)) {
	if dl, isDelim := d.token().(json.Delim); !isDelim || dl != '{' {
		d.refuse("body", "expected object")
		return
	}
	for {
		t := d.token()
		if dl, isDelim := t.(json.Delim); isDelim && dl == '}' {
			return
		}
		key, _ := t.(string)
		field := ""
		for _, f := range names {
			if strings.EqualFold(f, key) {
				field = f
				break
			}
		}
		v := d.token()
		where := "body." + truncate(key, 64)
		if field == "" {
			d.refuse(where, "unexpected property")
			d.skip(v)
			continue
		}
		set(d, field, where, v)
	}
}

// writeFields are wire.WriteFields' properties.
var writeFields = []string{"actor", "if_version", "fence", "message", "idempotency_key"}

// setWrite sets one of wire.WriteFields' properties; false if field is
// none of them.
func (d *oneDecode) setWrite(out *wire.WriteFields, field, where string, v json.Token) bool {
	switch field {
	case "if_version", "fence":
		if n, set := d.integer(where, v); set {
			if field == "fence" {
				out.Fence = n
			} else {
				out.IfVersion = n
			}
		}
		return true
	case "actor", "message", "idempotency_key":
		// As encoding/json does, null leaves a plain string as it was.
		if s, isNull, ok := d.str(where, v); ok && !isNull {
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

func (b *changeBody) set(d *oneDecode, field, where string, v json.Token) {
	out := &b.ArtifactChangeBody
	if d.setWrite(&out.WriteFields, field, where, v) {
		return
	}
	if field == "labels" {
		d.labels(where, v, &out.Labels)
		return
	}
	s, isNull, ok := d.str(where, v)
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
			d.refuse(where, `expected value to be one of "utf-8, base64"`)
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

func (b *noteBody) set(d *oneDecode, field, where string, v json.Token) {
	out := &b.NoteBody
	if d.setWrite(&out.WriteFields, field, where, v) {
		return
	}
	if s, isNull, ok := d.str(where, v); ok && !isNull {
		if field == "title" {
			out.Title = s
		} else {
			out.Body = s
		}
	}
}

// str takes a string property's value; null is its absence.
func (d *oneDecode) str(where string, v json.Token) (s string, isNull, ok bool) {
	switch x := v.(type) {
	case string:
		return x, false, true
	case nil:
		return "", true, true
	}
	d.refuse(where, "expected string")
	d.skip(v)
	return "", false, false
}

// integer takes an int64 property's value: a plain integer literal in
// range (encoding/json refuses 1.0 and 1e3 for an int64). set is false
// for null, which leaves the field as it was, and for a refused value.
func (d *oneDecode) integer(where string, v json.Token) (n int64, set bool) {
	switch x := v.(type) {
	case nil:
		return 0, false
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, true
		}
	}
	d.refuse(where, "expected integer")
	d.skip(v)
	return 0, false
}

// labels takes an object of strings into *out (a repeated property adds
// to the map, as encoding/json does); null is no labels.
func (d *oneDecode) labels(where string, v json.Token, out *map[string]string) {
	if v == nil {
		*out = nil
		return
	}
	if dl, ok := v.(json.Delim); !ok || dl != '{' {
		d.refuse(where, "expected object")
		d.skip(v)
		return
	}
	m := *out
	if m == nil {
		m = map[string]string{}
	}
	for {
		t := d.token()
		if dl, isDelim := t.(json.Delim); isDelim && dl == '}' {
			*out = m
			return
		}
		k, _ := t.(string)
		val := d.token()
		if s, isStr := val.(string); isStr {
			m[k] = s
			continue
		}
		d.refuse(where+"."+truncate(k, 64), "expected string")
		d.skip(val)
	}
}
