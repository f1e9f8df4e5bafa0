package policy

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// SetActorRoles returns src with actor's entry in [actors] set to roles
// (an exact entry: an actor named there has exactly those roles, whatever
// patterns and default_role say). src must parse, and roles must be
// defined (or AdminRole).
//
// The edit is made in place, line by line, so that the file keeps its
// comments and layout: the actor's line (or lines, for an array spread
// over several) is replaced, or a line is added at the end of the [actors]
// table, or a table is added at the end of the file. The result is parsed
// back and compared with the intended policy; if the file's shape defeats
// the line edit (dotted keys, an inline table), the policy is rendered
// canonically instead, without its comments, and canonical reports so.
func SetActorRoles(src []byte, actor string, roles []string) (out []byte, canonical bool, err error) {
	p, err := Parse(src)
	if err != nil {
		return nil, false, err
	}
	if actor == "" {
		return nil, false, &Error{Problems: []Problem{{Key: "actors", Message: "an empty actor name"}}}
	}
	want := p.File()
	actors := make(map[string][]string, len(want.Actors)+1)
	for k, v := range want.Actors {
		actors[k] = v
	}
	actors[actor] = slices.Clone(roles)
	want.Actors = actors
	if _, err := Compile(want); err != nil {
		return nil, false, err
	}
	if out, ok := editActors(src, actor, roles); ok && sameFile(out, want) {
		return out, false, nil
	}
	var b bytes.Buffer
	b.WriteString("# Rendered by agentspace: the file's layout could not be edited in place.\n")
	if err := toml.NewEncoder(&b).Encode(want); err != nil {
		return nil, false, fmt.Errorf("policy: rendering: %w", err)
	}
	if !sameFile(b.Bytes(), want) {
		return nil, false, fmt.Errorf("policy: the rendered file does not read back as the policy")
	}
	return b.Bytes(), true, nil
}

// sameFile reports whether src parses to want.
func sameFile(src []byte, want File) bool {
	p, err := Parse(src)
	if err != nil {
		return false
	}
	got := p.File()
	norm := func(f File) File {
		if f.Roles == nil {
			f.Roles = map[string]Rules{}
		}
		if f.Actors == nil {
			f.Actors = map[string][]string{}
		}
		for k, v := range f.Actors {
			if v == nil {
				f.Actors[k] = []string{}
			}
		}
		return f
	}
	a, b := norm(got), norm(want)
	if a.DefaultRole != b.DefaultRole || len(a.Roles) != len(b.Roles) || len(a.Actors) != len(b.Actors) {
		return false
	}
	for k, v := range b.Actors {
		if w, ok := a.Actors[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	for k, v := range b.Roles {
		w, ok := a.Roles[k]
		if !ok || fmt.Sprintf("%#v", v) != fmt.Sprintf("%#v", w) {
			return false
		}
	}
	return true
}

var bareKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// tomlKey writes k as a TOML key: bare when it may be, else a basic string.
func tomlKey(k string) string {
	if bareKeyRE().MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// actorLine is the line that gives actor roles.
func actorLine(indent, key string, roles []string) string {
	q := make([]string, len(roles))
	for i, r := range roles {
		q[i] = strconv.Quote(r) // role names are plain words
	}
	return indent + key + " = [" + strings.Join(q, ", ") + "]"
}

// editActors edits the [actors] table of src line by line; ok is false
// when it found nowhere to make the edit.
func editActors(src []byte, actor string, roles []string) ([]byte, bool) {
	text := string(src)
	nl := "\n"
	if strings.Contains(text, "\r\n") {
		nl = "\r\n"
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	table, header, lastKey := "", -1, -1
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case line == "" || line[0] == '#':
			continue
		case line[0] == '[':
			if header >= 0 && table == "actors" {
				// The [actors] table ended without the actor: add it.
				return insertLine(lines, max(lastKey, header)+1, actorLine("", tomlKey(actor), roles), nl), true
			}
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				return nil, false
			}
			table = normKey(strings.Trim(line[:end], "[]"))
			if table == "actors" {
				header, lastKey = i, i
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		// A value spread over lines (an array) ends where its brackets close.
		last := i
		for depth := bracketDepth(v); depth > 0 && last+1 < len(lines); {
			last++
			depth += bracketDepth(lines[last])
		}
		if table == "actors" {
			lastKey = last
			if normKey(k) == actor {
				indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
				repl := actorLine(indent, strings.TrimSpace(k), roles)
				if c := trailingComment(lines[last]); c != "" {
					before := strings.TrimSuffix(lines[last], c)
					repl += before[len(strings.TrimRight(before, " \t")):] + c
				}
				out := slices.Concat(lines[:i], []string{repl}, lines[last+1:])
				return []byte(strings.Join(out, nl)), true
			}
		}
		i = last
	}
	if header >= 0 {
		return insertLine(lines, lastKey+1, actorLine("", tomlKey(actor), roles), nl), true
	}
	// No [actors] table: add one at the end.
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	lines = append(lines, "", "[actors]", actorLine("", tomlKey(actor), roles), "")
	return []byte(strings.Join(lines, nl)), true
}

func insertLine(lines []string, at int, line, nl string) []byte {
	out := slices.Concat(lines[:at], []string{line}, lines[at:])
	return []byte(strings.Join(out, nl))
}

// bracketDepth is how many more '[' than ']' s holds outside strings and
// comments.
func bracketDepth(s string) int {
	depth := 0
	outsideStrings(s, func(_ int, r rune) bool {
		switch r {
		case '#':
			return false
		case '[':
			depth++
		case ']':
			depth--
		}
		return true
	})
	return depth
}

// trailingComment returns the "# ..." that ends line, outside strings.
func trailingComment(line string) string {
	at := -1
	outsideStrings(line, func(i int, r rune) bool {
		if r == '#' {
			at = i
			return false
		}
		return true
	})
	if at < 0 {
		return ""
	}
	return line[at:]
}

// outsideStrings calls fn with each rune of s (and its byte offset) that
// is outside a TOML string (not the quotes themselves), until fn returns false.
// Basic strings ("...") take backslash escapes; literal ones ('...') not.
func outsideStrings(s string, fn func(i int, r rune) bool) {
	var quote rune
	escaped := false
	for i, r := range s {
		switch {
		case quote != 0:
			switch {
			case escaped:
				escaped = false
			case r == '\\' && quote == '"':
				escaped = true
			case r == quote:
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		default:
			if !fn(i, r) {
				return
			}
		}
	}
}
