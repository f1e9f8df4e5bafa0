package dashboard

import (
	"html"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// spans matches the only markup highlight may add.
var spans = regexp.MustCompile(`<span class="tok-[cskn]">|</span>`)

// plain undoes highlight: drop its spans, unescape the rest.
func plain(h string) string { return html.UnescapeString(spans.ReplaceAllString(h, "")) }

func TestHighlightMarksTokensOfTheFileLanguage(t *testing.T) {
	src := "package main\n\n// say hi\nfunc main() { s := \"a \\\"b\\\" c\"; n := 0x1F; _ = `raw\nline` }\n"
	got := string(highlight("go", src))
	for _, want := range []string{
		`<span class="tok-k">package</span>`, `<span class="tok-k">func</span>`,
		`<span class="tok-c">// say hi</span>`,
		`<span class="tok-s">&#34;a \&#34;b\&#34; c&#34;</span>`,
		`<span class="tok-n">0x1F</span>`,
		"<span class=\"tok-s\">`raw\nline`</span>",
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, `<span class="tok-k">main</span>`, "an identifier is not a keyword")
	assert.Equal(t, src, plain(got))

	sql := string(highlight("SQL", "SELECT x FROM t -- why\nWHERE y = 'it''s'"))
	assert.Contains(t, sql, `<span class="tok-k">SELECT</span>`, "SQL keywords in any case")
	assert.Contains(t, sql, `<span class="tok-c">-- why</span>`)
	py := string(highlight("py", "def f(): return 'x' # done"))
	assert.Contains(t, py, `<span class="tok-k">def</span>`)
	assert.Contains(t, py, `<span class="tok-c"># done</span>`)
	assert.Equal(t, "a &lt;b&gt;", string(highlight("unknown", "a <b>")), "an unknown language is escaped text")
}

// Whatever the content and language, the only markup in the result is
// highlight's own spans, and the text reads back byte for byte.
func TestHighlightIsInertAndLossless(t *testing.T) {
	hostile := []string{
		`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, `'; DROP TABLE t; --`,
		"/* <b> unclosed", "\"unclosed <i>\n", "`<svg onload=x>`", "# <a href=javascript:x>",
		"\\", "\"\\", "0x<1", "\u00e9t\u00e9 <x> \U0001F600", "", "\n\n", "-- <", "//",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"<", ">", "&", "\"", "'", "`", "/", "*", "#", "-", "\\", "\n", "a", "1", "func", "select", " ", "é"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		hostile = append(hostile, b.String())
	}
	exts := []string{"go", "py", "ts", "rs", "c", "java", "sh", "sql", "toml", "yaml", "json", "txt"}
	for _, src := range hostile {
		for _, ext := range exts {
			got := string(highlight(ext, src))
			markup := spans.ReplaceAllString(got, "")
			assert.NotContains(t, markup, "<", "%s %q: markup other than spans", ext, src)
			assert.NotContains(t, markup, ">", "%s %q: markup other than spans", ext, src)
			assert.Equal(t, src, plain(got), "%s %q: the text reads back", ext, src)
		}
	}
}
