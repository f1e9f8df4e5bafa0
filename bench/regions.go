package bench

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The docs' generated tables sit between markers, each naming its region
// and the record it was rendered from (a path relative to the doc):
//
//	<!-- bench:begin figures bench/2026-12-02.json -->
//	...what RenderRegion("figures", rec, "bench/2026-12-02.json") returns...
//	<!-- bench:end figures -->
//
// UpdateRegions rewrites every region of a doc from a new record; a test
// renders each region again from the record its marker names and fails on
// any difference, so the tables cannot be edited by hand.

// Region is one generated region of a doc.
type Region struct {
	// Name is the region's renderer (RegionNames).
	Name string
	// Record is the path of the record it was rendered from, relative
	// to the doc.
	Record string
	// Body is what lies between the markers' lines.
	Body string
	// bodyStart and bodyEnd are Body's offsets in the doc; beginStart
	// is the begin marker's.
	beginStart, bodyStart, bodyEnd int
}

// ErrRegions is returned for a doc whose markers do not pair up, or name a
// region no renderer has.
var ErrRegions = errors.New("bench: generated regions")

var (
	beginMarker = regexp.MustCompile(`^<!-- bench:begin (\S+) (\S+) -->$`)
	endMarker   = regexp.MustCompile(`^<!-- bench:end (\S+) -->$`)
)

// Regions finds a doc's generated regions, in order. Each begin marker
// must be closed by an end marker of the same name before the next
// begins, and each name must be one of RegionNames, once per doc.
func Regions(doc string) ([]Region, error) {
	var (
		out  []Region
		open *Region
		at   int
	)
	lineNo := 0
	for at < len(doc) {
		end := strings.IndexByte(doc[at:], '\n')
		next := len(doc)
		if end >= 0 {
			next = at + end + 1
		}
		line := strings.TrimRight(doc[at:next], "\n")
		lineNo++
		switch {
		case beginMarker.MatchString(line):
			m := beginMarker.FindStringSubmatch(line)
			if open != nil {
				return nil, fmt.Errorf("%w: line %d begins %q inside %q", ErrRegions, lineNo, m[1], open.Name)
			}
			if _, ok := renderers[m[1]]; !ok {
				return nil, fmt.Errorf("%w: line %d: no region is named %q (want one of %s)", ErrRegions, lineNo, m[1], strings.Join(RegionNames(), ", "))
			}
			if slices.ContainsFunc(out, func(r Region) bool { return r.Name == m[1] }) {
				return nil, fmt.Errorf("%w: line %d: region %q twice", ErrRegions, lineNo, m[1])
			}
			open = &Region{Name: m[1], Record: m[2], beginStart: at, bodyStart: next}
		case endMarker.MatchString(line):
			name := endMarker.FindStringSubmatch(line)[1]
			if open == nil || open.Name != name {
				return nil, fmt.Errorf("%w: line %d ends %q, which is not open", ErrRegions, lineNo, name)
			}
			open.bodyEnd = at
			open.Body = doc[open.bodyStart:at]
			out = append(out, *open)
			open = nil
		case strings.HasPrefix(strings.TrimSpace(line), "<!-- bench:"):
			return nil, fmt.Errorf("%w: line %d is not a marker of the form <!-- bench:begin NAME RECORD --> or <!-- bench:end NAME -->", ErrRegions, lineNo)
		}
		at = next
	}
	if open != nil {
		return nil, fmt.Errorf("%w: region %q is not ended", ErrRegions, open.Name)
	}
	return out, nil
}

// UpdateRegions returns doc with every generated region rec covers (a
// CLI record the cli region, a growth record the growth region, a full
// docs run every other) rendered again
// from rec, its begin marker naming recordPath; the others stay as they
// are. A doc without regions is refused: it is not one the docs run keeps.
func UpdateRegions(doc string, rec *Record, recordPath string) (string, error) {
	regions, err := Regions(doc)
	if err != nil {
		return "", err
	}
	if len(regions) == 0 {
		return "", fmt.Errorf("%w: the doc has none", ErrRegions)
	}
	var b strings.Builder
	last := 0
	for _, r := range regions {
		if !coveredBy(r.Name, rec) {
			continue
		}
		body, err := RenderRegion(r.Name, rec, recordPath)
		if err != nil {
			return "", err
		}
		b.WriteString(doc[last:r.beginStart])
		fmt.Fprintf(&b, "<!-- bench:begin %s %s -->\n", r.Name, recordPath)
		b.WriteString(body)
		last = r.bodyEnd
	}
	b.WriteString(doc[last:])
	return b.String(), nil
}

// RegionNames are the regions RenderRegion renders.
func RegionNames() []string {
	var names []string
	for n := range renderers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// RenderRegion renders region name from rec: a paragraph naming the
// machine, the date and the command, then the region's tables. recordPath
// is where the doc links the record.
func RenderRegion(name string, rec *Record, recordPath string) (string, error) {
	render, ok := renderers[name]
	if !ok {
		return "", fmt.Errorf("%w: no region is named %q", ErrRegions, name)
	}
	if rec == nil || len(rec.Runs) == 0 {
		return "", fmt.Errorf("%w: no runs", ErrRecord)
	}
	var b strings.Builder
	b.WriteString("\n")
	b.WriteString(heading(rec, recordPath))
	b.WriteString("\n\n")
	render(&b, rec)
	b.WriteString("\n")
	return b.String(), nil
}

// heading is the paragraph every region starts with.
func heading(rec *Record, recordPath string) string {
	build := ""
	if rec.Build != "" {
		build = ", built from " + rec.Build
	}
	each := "each row measuring for " + rec.Duration
	if r := rec.run(cliRun); r != nil {
		each = fmt.Sprintf("each command run %d times as a whole process", r.CLIRuns)
	}
	if len(rec.growthRuns()) > 0 {
		each = "each operation timed for " + rec.Duration + " at each size"
	}
	return wrap(fmt.Sprintf("Generated by `wsctl bench docs` from one run on %s UTC (its record: [%s](%s)%s), %s: %s. Command: `%s`.",
		rec.Date, recordPath, recordPath, build, each, rec.Machine, rec.Command))
}

// wrap breaks a paragraph into lines of about 72 characters, never inside
// a code span (a command stays on one line, as it can be copied).
func wrap(s string) string {
	var (
		lines []string
		line  string
	)
	for _, w := range splitKeepingCode(s) {
		if line != "" && len(line)+1+len(w) > 72 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// splitKeepingCode splits s at spaces outside `code spans`.
func splitKeepingCode(s string) []string {
	var (
		out  []string
		cur  strings.Builder
		code bool
	)
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
			cur.WriteRune(r)
		case r == ' ' && !code:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
