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
// twice, each parse scanning it twice. The update's body (the served write
// path agents use most) is instead checked to be JSON (json.Valid, which
// allocates nothing) and walked once, applying the checks its schema
// states (changeBody.decodeJSON).
//
// Invariant: a body answers what huma's validation answered (the table of
// TestArtifactChangeBodyIsCheckedAsTheSchemaSays was recorded from it):
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
	switch {
	case b.bad != nil:
		return []error{b.bad}
	case !b.decoded:
		return []error{&bodyError{status: http.StatusUnsupportedMediaType, detail: huma.ErrorDetail{Location: "body", Message: "the content type is not JSON"}}}
	}
	return nil
}

// changeFields are the body's properties, as the schema names them.
var changeFields = []string{"actor", "if_version", "fence", "message", "idempotency_key", "kind", "content_type", "owner", "task_id", "labels", "content", "content_encoding"}

func (b *changeBody) decodeJSON(data []byte) {
	b.decoded = true
	d := &oneDecode{b: data}
	if !json.Valid(data) {
		// The answer huma gave: encoding/json's own words for it.
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errNotJSON
		}
		b.bad = &bodyError{status: http.StatusBadRequest, detail: huma.ErrorDetail{Location: "body", Message: err.Error()}}
		return
	}
	d.body(&b.ArtifactChangeBody)
	b.bad = d.schema
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

func (d *oneDecode) body(out *wire.ArtifactChangeBody) {
	if dl, isDelim := d.token().(json.Delim); !isDelim || dl != '{' {
		d.refuse("body", "expected object")
		return
	}
	d.object(out)
}

func (d *oneDecode) object(out *wire.ArtifactChangeBody) {
	for {
		t := d.token()
		if dl, isDelim := t.(json.Delim); isDelim && dl == '}' {
			return
		}
		key, _ := t.(string)
		field := ""
		for _, f := range changeFields {
			if strings.EqualFold(f, key) {
				field = f
				break
			}
		}
		v := d.token()
		where := "body." + truncate(key, 64)
		switch field {
		case "":
			d.refuse(where, "unexpected property")
			d.skip(v)
		case "if_version", "fence":
			if n, set := d.integer(where, v); set {
				if field == "fence" {
					out.Fence = n
				} else {
					out.IfVersion = n
				}
			}
		case "labels":
			d.labels(where, v, &out.Labels)
		default:
			s, isNull, ok := d.str(where, v)
			if !ok {
				continue
			}
			var p *string
			if !isNull {
				p = &s
			}
			// As encoding/json does, null empties a pointer and leaves a
			// plain string as it was.
			switch field {
			case "actor", "message", "idempotency_key", "content_encoding":
				if isNull {
					continue
				}
			}
			switch field {
			case "actor":
				out.Actor = s
			case "message":
				out.Message = s
			case "idempotency_key":
				out.IdempotencyKey = s
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
				if s != "utf-8" && s != "base64" {
					d.refuse(where, `expected value to be one of "utf-8, base64"`)
				}
				out.ContentEncoding = s
			}
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
