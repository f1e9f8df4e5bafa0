package dashboard

import (
	"html"
	"html/template"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A small syntax highlighter for the artifact view: comments, strings,
// numbers and keywords of the languages agents write most, by file
// extension. It knows nothing of a grammar beyond those tokens, which is
// what a reader scanning code needs; a full highlighter (Chroma) would add
// megabytes of lexers to every binary.
//
// Safety: every byte of the text reaches the output through
// html.EscapeString, inside or outside a span; the only markup added is
// <span class="tok-X"> and </span> with X from a fixed set. So the result
// is inert whatever the content, as the escaping tests check.

// lexicon is what the scanner knows of one language.
type lexicon struct {
	line       []string // line-comment openers
	blockOpen  string   // block-comment opener ("" for none)
	blockClose string
	quotes     string // string delimiters; a backquote string may span lines
	keywords   map[string]bool
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

var (
	cLike = lexicon{line: []string{"//"}, blockOpen: "/*", blockClose: "*/", quotes: `"'`}
	hashy = lexicon{line: []string{"#"}, quotes: `"'`}

	// lexicons is built on the first highlight, not in every wsctl process.
	lexicons = sync.OnceValue(func() map[string]lexicon {
		return map[string]lexicon{
			"go": with(lexicon{line: cLike.line, blockOpen: "/*", blockClose: "*/", quotes: "\"'`"},
				"break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false iota"),
			"py": with(lexicon{line: hashy.line, quotes: `"'`},
				"and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield None True False self"),
			"js": with(lexicon{line: cLike.line, blockOpen: "/*", blockClose: "*/", quotes: "\"'`"},
				"async await break case catch class const continue default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while yield null undefined true false type interface enum implements readonly"),
			"rs":   with(cLike, "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while"),
			"c":    with(cLike, "auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class namespace public private protected template typename new delete this true false nullptr"),
			"java": with(cLike, "abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new package private protected public return short static super switch this throw throws try void while true false null"),
			"sh":   with(hashy, "if then else elif fi for while until do done case esac in function return local export set unset readonly shift exit"),
			"sql": with(lexicon{line: []string{"--"}, blockOpen: "/*", blockClose: "*/", quotes: `'"`},
				"select from where and or not insert into values update set delete create table index on primary key references alter drop as join left right inner outer group by order limit offset returning null is in exists begin commit rollback union distinct having case when then else end default unique"),
			"toml": with(hashy, "true false"),
			"yaml": with(hashy, "true false null yes no"),
			"json": with(lexicon{quotes: `"`}, "true false null"),
		}
	})

	// extensions maps a file extension to its lexicon's name.
	extensions = map[string]string{
		"go": "go", "py": "py", "js": "js", "mjs": "js", "cjs": "js", "jsx": "js", "ts": "js", "tsx": "js", "mts": "js",
		"rs": "rs", "c": "c", "h": "c", "cc": "c", "cpp": "c", "hpp": "c", "java": "java", "kt": "java",
		"sh": "sh", "bash": "sh", "zsh": "sh", "sql": "sql", "toml": "toml", "yaml": "yaml", "yml": "yaml", "json": "json",
	}
)

func with(l lexicon, kw string) lexicon {
	l.keywords = words(kw)
	return l
}

// highlight renders text as escaped HTML with token spans for the
// language of extension ext (no spans for one it does not know).
func highlight(ext, text string) template.HTML {
	name := extensions[strings.ToLower(ext)]
	lx, ok := lexicons()[name]
	if !ok {
		return template.HTML(html.EscapeString(text)) // #nosec G203 -- escaped
	}
	var b strings.Builder
	b.Grow(len(text) + len(text)/4)
	plainFrom := 0
	flush := func(to int) {
		b.WriteString(html.EscapeString(text[plainFrom:to]))
	}
	emit := func(class string, from, to int) {
		flush(from)
		b.WriteString(`<span class="tok-` + class + `">`)
		b.WriteString(html.EscapeString(text[from:to]))
		b.WriteString(`</span>`)
		plainFrom = to
	}
	i := 0
	for i < len(text) {
		rest := text[i:]
		if end := lineComment(lx, rest); end > 0 {
			emit("c", i, i+end)
			i += end
			continue
		}
		if lx.blockOpen != "" && strings.HasPrefix(rest, lx.blockOpen) {
			end := strings.Index(rest[len(lx.blockOpen):], lx.blockClose)
			if end < 0 {
				end = len(rest)
			} else {
				end += len(lx.blockOpen) + len(lx.blockClose)
			}
			emit("c", i, i+end)
			i += end
			continue
		}
		c := text[i]
		if strings.IndexByte(lx.quotes, c) >= 0 {
			end := quoted(rest)
			emit("s", i, i+end)
			i += end
			continue
		}
		r, size := utf8.DecodeRuneInString(rest)
		startOfWord := i == 0 || !isWordByte(text[i-1])
		switch {
		case startOfWord && c >= '0' && c <= '9':
			end := 1
			for end < len(rest) && (isWordByte(rest[end]) || rest[end] == '.') {
				end++
			}
			emit("n", i, i+end)
			i += end
		case startOfWord && (r == '_' || unicode.IsLetter(r)):
			end := size
			for end < len(rest) && isWordByte(rest[end]) {
				end++
			}
			if w := rest[:end]; lx.keywords[w] || name == "sql" && lx.keywords[strings.ToLower(w)] {
				emit("k", i, i+end)
			}
			i += end
		default:
			i += size
		}
	}
	flush(len(text))
	return template.HTML(b.String()) // #nosec G203 -- every byte of text went through html.EscapeString
}

// lineComment returns the length of the line comment rest starts with
// (up to, not including, its newline), or 0.
func lineComment(lx lexicon, rest string) int {
	for _, p := range lx.line {
		if strings.HasPrefix(rest, p) {
			if n := strings.IndexByte(rest, '\n'); n >= 0 {
				return n
			}
			return len(rest)
		}
	}
	return 0
}

// quoted returns the length of the string literal rest starts with: up to
// its closing quote (a backslash escapes the next byte), or the end of the
// line for an unclosed one; a backquoted string may span lines.
func quoted(rest string) int {
	q := rest[0]
	for i := 1; i < len(rest); i++ {
		switch c := rest[i]; {
		case c == '\\' && q != '`':
			i++
		case c == q:
			return i + 1
		case c == '\n' && q != '`':
			return i
		}
	}
	return len(rest)
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
}
