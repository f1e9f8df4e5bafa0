package policy_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
)

// refMatch is the reference glob matcher: a translation to a regular
// expression, written apart from the package's backtracking walk.
func refMatch(pat, name string) bool {
	segs := strings.Split(pat, "/")
	if pat == "**" {
		return true
	}
	var b strings.Builder
	b.WriteString("(?s)^")
	for i, s := range segs {
		last := i == len(segs)-1
		if i > 0 && segs[i-1] != "**" && !(last && s == "**") {
			b.WriteString("/")
		}
		switch {
		case s == "**" && last:
			b.WriteString("(?:/[^/]*)*")
		case s == "**":
			b.WriteString("(?:[^/]*/)*")
		default:
			parts := strings.Split(s, "*")
			for j, part := range parts {
				if j > 0 {
					b.WriteString("[^/]*")
				}
				b.WriteString(regexp.QuoteMeta(part))
			}
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(name)
}

// refAllowed is the reference evaluator: straight from the File, no
// compilation, and the rules as the docs state them.
func refAllowed(f policy.File, actor string, a policy.Action, object string) bool {
	roles, ok := f.Actors[actor]
	if !ok {
		roles = nil
		for k, rs := range f.Actors {
			if strings.Contains(k, "*") && refMatch(k, actor) {
				roles = append(roles, rs...)
			}
		}
		if roles == nil && f.DefaultRole != "" {
			roles = []string{f.DefaultRole}
		}
	}
	for _, r := range roles {
		if r == policy.AdminRole {
			return true
		}
		rules, ok := f.Roles[r]
		if !ok {
			continue
		}
		var pats []string
		word := ""
		switch a {
		case policy.ArtifactRead:
			pats = rules.ArtifactsRead
		case policy.ArtifactWrite:
			pats = rules.ArtifactsWrite
		case policy.ArtifactDelete:
			pats = rules.ArtifactsDelete
			if pats == nil {
				pats = rules.ArtifactsWrite
			}
		case policy.NoteRead:
			pats = rules.NotesRead
		case policy.NoteWrite:
			pats = rules.NotesWrite
		case policy.Lock:
			pats = rules.Locks
		case policy.MessageSend:
			pats = rules.Messages
			if pats == nil {
				pats = []string{"**"}
			}
		case policy.TaskAdd, policy.TaskClaim, policy.TaskFinish, policy.TaskOthers:
			word = strings.TrimPrefix(string(a), "task.")
			if slices.Contains(rules.Tasks, word) || slices.Contains(rules.Tasks, "*") {
				return true
			}
		default:
			word = strings.TrimPrefix(string(a), "admin.")
			if slices.Contains(rules.Admin, word) || slices.Contains(rules.Admin, "*") {
				return true
			}
		}
		for _, p := range pats {
			if refMatch(p, object) {
				return true
			}
		}
	}
	return false
}

var (
	words   = []string{"a", "b", "src", "plans", "x.md", "y.go", "file:src"}
	pwords  = []string{"a", "b", "src", "plans", "*", "*.md", "*.go", "x*", "**", "file:src"}
	rolesIn = []string{"r0", "r1", "r2", "admin", "ghost"}
)

func randName(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	segs := make([]string, n)
	for i := range segs {
		segs[i] = words[r.IntN(len(words))]
	}
	return strings.Join(segs, "/")
}

func randPattern(r *rand.Rand) string {
	for {
		n := 1 + r.IntN(4)
		segs := make([]string, n)
		for i := range segs {
			segs[i] = pwords[r.IntN(len(pwords))]
		}
		p := strings.Join(segs, "/")
		if _, err := policy.CompilePattern(p); err == nil {
			return p
		}
	}
}

func randPatterns(r *rand.Rand) []string {
	if r.IntN(4) == 0 {
		return nil
	}
	out := make([]string, r.IntN(4))
	for i := range out {
		out[i] = randPattern(r)
	}
	return out
}

func randRights(r *rand.Rand, set []string) []string {
	var out []string
	for _, w := range set {
		if r.IntN(3) == 0 {
			out = append(out, w)
		}
	}
	return out
}

func randFile(r *rand.Rand) policy.File {
	f := policy.File{Roles: map[string]policy.Rules{}, Actors: map[string][]string{}}
	for _, name := range []string{"r0", "r1", "r2"} {
		if r.IntN(5) == 0 {
			continue
		}
		f.Roles[name] = policy.Rules{
			ArtifactsRead: randPatterns(r), ArtifactsWrite: randPatterns(r), ArtifactsDelete: randPatterns(r),
			NotesRead: randPatterns(r), NotesWrite: randPatterns(r), Locks: randPatterns(r),
			Tasks: randRights(r, []string{"add", "claim", "finish", "others", "*"}),
			Admin: randRights(r, []string{"policy", "compact", "import", "tokens", "export", "*"}),
		}
	}
	defined := func(rs []string) []string {
		var out []string
		for _, x := range rs {
			if _, ok := f.Roles[x]; ok || x == policy.AdminRole {
				out = append(out, x)
			}
		}
		return out
	}
	for _, actor := range []string{"ann", "bo", "a*", "*"} {
		if r.IntN(2) == 0 {
			f.Actors[actor] = defined(randRights(r, rolesIn))
		}
	}
	if d := defined([]string{rolesIn[r.IntN(len(rolesIn))]}); len(d) == 1 && r.IntN(2) == 0 {
		f.DefaultRole = d[0]
	}
	return f
}

// checkAgainstReference compiles a random policy from seed and compares
// every decision of a random set of requests with the reference's.
func checkAgainstReference(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed>>1|1))
	f := randFile(r)
	p, err := policy.Compile(f)
	require.NoError(t, err, "seed %d: %+v", seed, f)
	for i := 0; i < 50; i++ {
		actor := []string{"ann", "bo", "al", "zed"}[r.IntN(4)]
		a := policy.Actions[r.IntN(len(policy.Actions))]
		obj := randName(r)
		want := refAllowed(f, actor, a, obj)
		got := p.Allowed(actor, a, obj)
		require.Equal(t, want, got.Allowed, "seed %d: %s %s %q under %+v: %s", seed, actor, a, obj, f, got.Reason())
	}
	for i := 0; i < 50; i++ {
		pat, name := randPattern(r), randName(r)
		cp, err := policy.CompilePattern(pat)
		require.NoError(t, err)
		require.Equal(t, refMatch(pat, name), cp.Match(name), "seed %d: %q ~ %q", seed, pat, name)
	}
}

func TestRandomPoliciesAgreeWithReference(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		checkAgainstReference(t, seed)
	}
}

func FuzzPolicyAgainstReference(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkAgainstReference(t, seed) })
}

func FuzzPatternAgainstReference(f *testing.F) {
	for _, c := range [][2]string{{"**", "a/b"}, {"src/**", "src"}, {"a/**/b", "a/x/b"}, {"*.md", "x.md"}, {"**/x*", "a/xy"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		cp, err := policy.CompilePattern(pat)
		if err != nil || !utf8.ValidString(name) {
			return // names are valid UTF-8 before any check sees them
		}
		if got, want := cp.Match(name), refMatch(pat, name); got != want {
			t.Fatalf("%q ~ %q: got %v, reference %v", pat, name, got, want)
		}
	})
}

func ExamplePolicy_Allowed() {
	p, err := policy.Parse([]byte(`
[roles.planner]
artifacts_read  = ["**"]
artifacts_write = ["plans/**"]
[actors]
alice = ["planner"]
`))
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"plans/auth.md", "src/auth.go"} {
		d := p.Allowed("alice", policy.ArtifactWrite, name)
		fmt.Println(name, d.Allowed, d.Reason())
	}
	// Output:
	// plans/auth.md true granted by roles.planner.artifacts_write "plans/**"
	// src/auth.go false no artifacts_write entry of roles planner grants it
}
