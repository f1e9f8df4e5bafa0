package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// File is a policy file's shape, as TOML decodes it.
type File struct {
	// DefaultRole is the role of actors that [actors] does not name; empty:
	// they have no rights.
	DefaultRole string           `toml:"default_role,omitempty" json:"default_role,omitempty"`
	Roles       map[string]Rules `toml:"roles" json:"roles"`
	// Actors maps an actor's name, or a pattern of names, to its roles.
	Actors map[string][]string `toml:"actors" json:"actors"`
}

// Rules is one role's rules.
type Rules struct {
	ArtifactsRead  []string `toml:"artifacts_read,omitempty" json:"artifacts_read,omitempty"`
	ArtifactsWrite []string `toml:"artifacts_write,omitempty" json:"artifacts_write,omitempty"`
	// ArtifactsDelete, when absent, is ArtifactsWrite.
	ArtifactsDelete []string `toml:"artifacts_delete,omitempty" json:"artifacts_delete,omitempty"`
	NotesRead       []string `toml:"notes_read,omitempty" json:"notes_read,omitempty"`
	NotesWrite      []string `toml:"notes_write,omitempty" json:"notes_write,omitempty"`
	// Tasks: "add", "claim", "finish", "others", or "*" for all four.
	Tasks []string `toml:"tasks,omitempty" json:"tasks,omitempty"`
	Locks []string `toml:"locks,omitempty" json:"locks,omitempty"`
	// Admin: "policy", "compact", "import", "tokens", "export", or "*" for all.
	Admin []string `toml:"admin,omitempty" json:"admin,omitempty"`
	// Messages are the recipients the role may message: actor names and
	// role:NAME, as patterns. Absent: anyone; empty: no one.
	Messages []string `toml:"messages,omitempty" json:"messages,omitempty"`
}

// Problem is one thing wrong with a policy file, at its line (0 when the
// line is not known).
type Problem struct {
	Line    int    `json:"line"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

// String gives "line N: key: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid policy")

// Error reports every problem of a policy file, each with its line.
type Error struct {
	Problems []Problem `json:"problems"`
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid policy: " + strings.Join(lines, "; ")
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

var (
	roleNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`) })
	taskRights = map[string]Action{"add": TaskAdd, "claim": TaskClaim, "finish": TaskFinish, "others": TaskOthers}
	// adminRights are the administration rights, by their word in the file.
	adminRights = map[string]Action{"policy": AdminPolicy, "compact": AdminCompact, "import": AdminImport, "tokens": AdminTokens, "export": AdminExport}
)

// MaxSize bounds a policy file.
const MaxSize = 1 << 20

// Parse reads and compiles a policy file. A file with any problem gives an
// *Error listing all of them, each with its line; nothing is half-compiled.
func Parse(src []byte) (*Policy, error) {
	if len(src) > MaxSize {
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("%d bytes is over the limit of %d", len(src), MaxSize)}}}
	}
	var f File
	md, err := toml.NewDecoder(bytes.NewReader(src)).Decode(&f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{Problems: []Problem{{Line: pe.Position.Line, Message: pe.Message}}}
		}
		// A type mismatch: toml names the key but not the line.
		return nil, &Error{Problems: []Problem{{Message: strings.TrimPrefix(err.Error(), "toml: ")}}}
	}
	lines := keyLines(src)
	var probs []Problem
	add := func(key, format string, args ...any) {
		probs = append(probs, Problem{Line: lines.find(key), Key: key, Message: fmt.Sprintf(format, args...)})
	}
	for _, k := range md.Undecoded() {
		add(k.String(), "unknown key")
	}
	p, semantic := compile(f)
	for _, s := range semantic {
		add(s.Key, "%s", s.Message)
	}
	if len(probs) > 0 {
		sort.SliceStable(probs, func(i, j int) bool { return probs[i].Line < probs[j].Line })
		return nil, &Error{Problems: probs}
	}
	return p, nil
}

// Compile checks and compiles a policy given as a File (built in code
// rather than parsed); its problems carry no lines.
func Compile(f File) (*Policy, error) {
	p, probs := compile(f)
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	return p, nil
}

func compile(f File) (*Policy, []Problem) {
	var probs []Problem
	add := func(key, format string, args ...any) {
		probs = append(probs, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	p := &Policy{file: f, defaultRole: f.DefaultRole, roles: map[string]*role{}, actors: map[string][]string{}}
	for _, name := range sortedKeys(f.Roles) {
		rules := f.Roles[name]
		key := "roles." + name
		if name == AdminRole {
			add(key, "admin is the built-in role with every right; it cannot be redefined")
			continue
		}
		if !roleNameRE().MatchString(name) {
			add(key, "a role name is a lower-case word (a-z, 0-9, _ or -, starting with a letter)")
			continue
		}
		r := &role{name: name, patterns: map[Action][]Pattern{}, flags: map[Action]bool{}}
		for _, pa := range []struct {
			key  string
			a    Action
			pats []string
		}{
			{"artifacts_read", ArtifactRead, rules.ArtifactsRead},
			{"artifacts_write", ArtifactWrite, rules.ArtifactsWrite},
			{"artifacts_delete", ArtifactDelete, rules.ArtifactsDelete},
			{"notes_read", NoteRead, rules.NotesRead},
			{"notes_write", NoteWrite, rules.NotesWrite},
			{"locks", Lock, rules.Locks},
			{"messages", MessageSend, rules.Messages},
		} {
			for _, s := range pa.pats {
				pat, err := CompilePattern(s)
				if err != nil {
					add(key+"."+pa.key, "%v", err)
					continue
				}
				r.patterns[pa.a] = append(r.patterns[pa.a], pat)
			}
		}
		if rules.ArtifactsDelete == nil {
			r.patterns[ArtifactDelete] = r.patterns[ArtifactWrite]
		}
		if rules.Messages == nil {
			r.patterns[MessageSend] = []Pattern{anyone}
		}
		flags := func(field string, words []string, set map[string]Action) {
			for _, w := range words {
				if w == "*" {
					for _, a := range set {
						r.flags[a] = true
					}
					continue
				}
				a, ok := set[w]
				if !ok {
					add(key+"."+field, "unknown right %q: one of %s or *", w, strings.Join(sortedKeys(set), ", "))
					continue
				}
				r.flags[a] = true
			}
		}
		flags("tasks", rules.Tasks, taskRights)
		flags("admin", rules.Admin, adminRights)
		p.roles[name] = r
	}
	known := func(r string) bool { return r == AdminRole || hasRole(f, r) }
	if f.DefaultRole != "" && !known(f.DefaultRole) {
		add("default_role", "role %q is not defined", f.DefaultRole)
	}
	for _, actor := range sortedKeys(f.Actors) {
		roles := f.Actors[actor]
		key := "actors." + actor
		if actor == "" {
			add(key, "an empty actor name")
			continue
		}
		for _, r := range roles {
			if !known(r) {
				add(key, "role %q is not defined", r)
			}
		}
		if strings.Contains(actor, "*") {
			pat, err := CompilePattern(actor)
			if err != nil {
				add(key, "%v", err)
				continue
			}
			p.actorGlobs = append(p.actorGlobs, actorGlob{pat: pat, roles: slices.Clone(roles)})
			continue
		}
		p.actors[actor] = slices.Clone(roles)
	}
	return p, probs
}

func hasRole(f File, name string) bool {
	_, ok := f.Roles[name]
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lineIndex maps dotted keys to the line that sets them.
type lineIndex map[string]int

// keyLines finds, line by line, the table headers and the keys set under
// them. It reads the plain shape policy files have (tables and key =
// value lines); a key it cannot place gets line 0.
func keyLines(src []byte) lineIndex {
	idx := lineIndex{}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), MaxSize)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#':
		case line[0] == '[':
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				continue
			}
			table = normKey(strings.Trim(line[:end], "[]"))
			if _, ok := idx[table]; !ok {
				idx[table] = n
			}
		default:
			k, _, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			full := normKey(k)
			if table != "" {
				full = table + "." + full
			}
			if _, ok := idx[full]; !ok {
				idx[full] = n
			}
		}
	}
	return idx
}

// normKey drops the spaces and quotes of a dotted key.
func normKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// find returns the line of key, or of its nearest enclosing table.
func (idx lineIndex) find(key string) int {
	for k := key; k != ""; {
		if n, ok := idx[k]; ok {
			return n
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}
