package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Pattern is a compiled glob over "/"-separated names: "*" within a
// segment, "**" across segments.
type Pattern struct {
	src  string
	segs []string // "**" for a segment that matches any number of segments
	all  bool     // the pattern is "**": it matches every name
}

// CompilePattern checks and compiles a pattern. "**" must be a whole
// segment, and no segment may be empty.
func CompilePattern(p string) (Pattern, error) {
	if p == "" {
		return Pattern{}, fmt.Errorf("empty pattern")
	}
	if !utf8.ValidString(p) {
		return Pattern{}, fmt.Errorf("pattern %q is not valid UTF-8", p)
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch {
		case s == "":
			return Pattern{}, fmt.Errorf("pattern %q has an empty segment", p)
		case s != "**" && strings.Contains(s, "**"):
			return Pattern{}, fmt.Errorf("pattern %q: ** must be a whole segment", p)
		case s == "**" && i > 0 && segs[i-1] == "**":
			return Pattern{}, fmt.Errorf("pattern %q repeats **", p)
		}
	}
	return Pattern{src: p, segs: segs, all: p == "**"}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether name matches the whole pattern.
func (p Pattern) Match(name string) bool {
	if p.all {
		return true
	}
	if len(p.segs) == 1 {
		// The common case, a kind or a single segment, without splitting.
		return !strings.Contains(name, "/") && matchSegment(p.segs[0], name)
	}
	return matchSegments(p.segs, strings.Split(name, "/"))
}

// matchParts is Match for a name already split at "/" (Check splits the
// object once for all the patterns it tries).
func (p Pattern) matchParts(name string, parts []string) bool {
	if p.all {
		return true
	}
	if len(p.segs) == 1 {
		return len(parts) == 1 && matchSegment(p.segs[0], name)
	}
	return matchSegments(p.segs, parts)
}

// matchSegments is the wildcard match of segs against names where "**" is
// the star: greedy, backtracking only to the latest "**", which is enough
// because a later "**" can absorb whatever an earlier one would have.
func matchSegments(segs, names []string) bool {
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(names) {
		switch {
		case pi < len(segs) && segs[pi] == "**":
			star, mark = pi, ni
			pi++
		case pi < len(segs) && matchSegment(segs[pi], names[ni]):
			pi++
			ni++
		case star >= 0:
			mark++
			pi, ni = star+1, mark
		default:
			return false
		}
	}
	for pi < len(segs) && segs[pi] == "**" {
		pi++
	}
	return pi == len(segs)
}

// matchSegment matches one segment, where "*" is any run of characters,
// by the same greedy walk over bytes.
func matchSegment(pat, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(pat) && pat[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(pat) && pat[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			mark++
			pi, si = star+1, mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}
