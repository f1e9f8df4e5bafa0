package printable

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProblem(t *testing.T) {
	for s, want := range map[string]string{
		"plans/ü.md":        "",
		"a\x00b":            "contains a NUL character",
		"a\nb":              "contains control character U+000A",
		"a\x7fb":            "contains control character U+007F",
		"\xff\xfe":          "is not valid UTF-8",
		"src/\u202egnp.exe": "contains control character U+202E",
		"a\u200bb":          "contains control character U+200B",
		"a\ufeffb":          "contains control character U+FEFF",
	} {
		assert.Equal(t, want, Problem(s, false), "%q", s)
	}
	assert.Equal(t, "", Problem("line one\n\tline two\r\n", true))
	assert.Equal(t, "contains control character U+001B", Problem("a\x1bb", true))
	assert.Equal(t, "", Problem("family: \U0001F468\u200D\U0001F469", true), "text keeps emoji joiners")
}
