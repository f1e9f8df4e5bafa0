// Package printable checks that a string is printable text: the one test
// behind the input checks of package workspace (names) and of the engine
// (workspace/engine: actors, keys, titles, bodies).
package printable

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Problem says why s is not printable UTF-8 text, or returns "" if it is:
// invalid UTF-8, a NUL, or a control character (newlines, tabs and
// carriage returns are text when multiline). A single line (a name, an
// actor, a key) also refuses format characters (Unicode category Cf): a
// bidi override makes "src/\u202egnp.exe" display as "src/exe.png", and
// zero-width characters make two names that look alike differ. Multiline
// text keeps them: emoji sequences join with U+200D.
func Problem(s string, multiline bool) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if r == 0 {
			return "contains a NUL character"
		}
		if multiline && (r == '\n' || r == '\t' || r == '\r') {
			continue
		}
		if unicode.IsControl(r) || r == utf8.RuneError || (!multiline && unicode.Is(unicode.Cf, r)) {
			return fmt.Sprintf("contains control character %U", r)
		}
	}
	return ""
}

// IsText reports whether b reads as text: valid UTF-8 without NUL bytes.
// Content types are inferred by it (internal/mediatype's For) and diffs
// of content that is not text are not drawn line by line.
func IsText(b []byte) bool {
	return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}
