// Package jsonx writes and reads the few JSON shapes the hot records take
// without reflection, byte for byte as encoding/json writes and reads them.
//
// AppendString writes a string exactly as json.Marshal does (HTML
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped). Reader reads the tokens of a strict subset of JSON: whatever
// it cannot read exactly as encoding/json would (a number with a fraction
// or an exponent, a null, an escape JSON does not have, a raw control
// character), it refuses, and its caller decodes the input with
// encoding/json instead, which then answers as it always did. So a fast
// path built on it either gives encoding/json's answer or none.
package jsonx

import (
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// htmlSafe reports whether json.Marshal writes the ASCII byte b as is.
func htmlSafe(b byte) bool {
	return b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// AppendString appends s as json.Marshal writes a string.
func AppendString[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		c, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendStringMap appends m as json.Marshal writes a non-nil map of
// strings: its keys sorted.
func AppendStringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		dst = AppendString(dst, m[k])
	}
	return append(dst, '}')
}

// Reader reads JSON tokens from B, from I on. Each method skips the
// whitespace before its token and reports false, consuming nothing it
// can be trusted with, when the next token is not what it reads.
type Reader struct {
	B []byte
	I int
}

func (r *Reader) space() {
	for r.I < len(r.B) {
		switch r.B[r.I] {
		case ' ', '\t', '\n', '\r':
			r.I++
		default:
			return
		}
	}
}

// Delim reads the one-byte token c ('{', '}', '[', ']', ':' or ',').
func (r *Reader) Delim(c byte) bool {
	r.space()
	if r.I < len(r.B) && r.B[r.I] == c {
		r.I++
		return true
	}
	return false
}

// Peek returns the next token's first byte, 0 at the end.
func (r *Reader) Peek() byte {
	r.space()
	if r.I < len(r.B) {
		return r.B[r.I]
	}
	return 0
}

// End reports whether nothing but whitespace is left.
func (r *Reader) End() bool {
	r.space()
	return r.I == len(r.B)
}

// Null reads a null.
func (r *Reader) Null() bool {
	r.space()
	if len(r.B)-r.I >= 4 && string(r.B[r.I:r.I+4]) == "null" {
		r.I += 4
		return true
	}
	return false
}

// Raw reads a string without escapes and returns its literal, quotes
// included (what a json.Unmarshaler such as time.Time's is given).
func (r *Reader) Raw() ([]byte, bool) {
	r.space()
	start := r.I
	if r.I >= len(r.B) || r.B[r.I] != '"' {
		return nil, false
	}
	for i := r.I + 1; i < len(r.B); i++ {
		switch c := r.B[i]; {
		case c == '"':
			r.I = i + 1
			return r.B[start:r.I], true
		case c == '\\' || c < ' ':
			return nil, false
		}
	}
	return nil, false
}

// String reads a string and returns it unescaped as encoding/json
// unescapes it: invalid UTF-8 becomes U+FFFD byte by byte, and a lone
// surrogate escape U+FFFD.
func (r *Reader) String() (string, bool) {
	r.space()
	if r.I >= len(r.B) || r.B[r.I] != '"' {
		return "", false
	}
	i := r.I + 1
	// The common case: nothing to unescape or replace.
	for i < len(r.B) {
		c := r.B[i]
		if c == '"' {
			s := string(r.B[r.I+1 : i])
			r.I = i + 1
			return s, true
		}
		if c == '\\' || c < ' ' {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		rr, size := utf8.DecodeRune(r.B[i:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	out := make([]byte, 0, len(r.B)-r.I)
	out = append(out, r.B[r.I+1:i]...)
	for i < len(r.B) {
		c := r.B[i]
		switch {
		case c == '"':
			r.I = i + 1
			return string(out), true
		case c < ' ':
			return "", false
		case c == '\\':
			if i+1 >= len(r.B) {
				return "", false
			}
			switch e := r.B[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := u4(r.B[i:])
				if rr < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(rr) {
					if rr1 := u4(r.B[i:]); rr1 >= 0 {
						if dec := utf16.DecodeRune(rr, rr1); dec != utf8.RuneError {
							i += 6
							out = utf8.AppendRune(out, dec)
							continue
						}
					}
					rr = utf8.RuneError
				}
				out = utf8.AppendRune(out, rr)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			rr, size := utf8.DecodeRune(r.B[i:])
			out = utf8.AppendRune(out, rr)
			i += size
		}
	}
	return "", false
}

// u4 is the rune of the \uXXXX escape s starts with, or -1.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Int64 reads an integer without fraction or exponent that fits an int64.
func (r *Reader) Int64() (int64, bool) {
	r.space()
	start, i := r.I, r.I
	if i < len(r.B) && r.B[i] == '-' {
		i++
	}
	digits := i
	for i < len(r.B) && '0' <= r.B[i] && r.B[i] <= '9' {
		i++
	}
	if i == digits || (r.B[digits] == '0' && i > digits+1) {
		return 0, false
	}
	if i < len(r.B) {
		switch r.B[i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(r.B[start:i]), 10, 64)
	if err != nil {
		return 0, false
	}
	r.I = i
	return n, true
}
