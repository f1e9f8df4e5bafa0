// Package printable checks that a string is printable text: the one test
// behind the input checks of package workspace (names) and of the engine
// in workspace/driver (actors, keys, titles, bodies).
package printable

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Problem says why s is not printable UTF-8 text, or returns "" if it is:
// invalid UTF-8, a NUL, or a control character (newlines, tabs and
// carriage returns are text when multiline).
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
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Sprintf("contains control character %U", r)
		}
	}
	return ""
}
