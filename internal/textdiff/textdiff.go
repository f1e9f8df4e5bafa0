// Package textdiff renders unified diffs of two texts, for wsctl's
// artifact diff and the shadow package's promotions.
package textdiff

import (
	"fmt"
	"strings"
)

// A line diff of our own (Myers' O(ND) algorithm) rather than a dependency:
// it is ~150 lines, we need only unified output of two texts, and the
// well-known Go diff libraries either pull in more than that or are
// internal to the Go tree.

// maxEditCost bounds the Myers search; beyond it the diff falls back to
// "replace everything in between", which is still a correct diff.
const maxEditCost = 2000

type opKind byte

const (
	opEqual opKind = ' '
	opDel   opKind = '-'
	opIns   opKind = '+'
)

type edit struct {
	kind opKind
	a, b int // line index in a (for equal and del) and in b (for equal and ins)
}

// splitLines splits s into lines that keep their "\n"; the last line may lack it.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines returns an edit script turning a into b.
func diffLines(a, b []string) []edit {
	var out []edit
	// Common prefix and suffix cost nothing and shrink the search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		out = append(out, edit{opEqual, pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf], pre)...)
	for i := suf; i > 0; i-- {
		out = append(out, edit{opEqual, len(a) - i, len(b) - i})
	}
	return out
}

// myers finds a shortest edit script of a into b (offset is the index of
// a[0] and b[0] in the whole texts).
func myers(a, b []string, offset int) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(n, m, offset)
	}
	max := n + m
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := -1
	for d := 0; d <= max && d <= maxEditCost; d++ {
		// Keep only the diagonals step d can reach: memory grows as D².
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
		if found >= 0 {
			break
		}
	}
	if found < 0 {
		return replaceAll(n, m, offset)
	}
	// Walk back through the snapshots to recover the path.
	var rev []edit
	x, y := n, m
	for d := found; d > 0; d-- {
		vd := trace[d] // vd[k+d] is diagonal k after step d-1
		k := x - y
		var pk int
		if k == -d || (k != d && vd[k-1+d] < vd[k+1+d]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := vd[pk+d]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, edit{opEqual, x + offset, y + offset})
		}
		if x == px {
			y--
			rev = append(rev, edit{opIns, x + offset, y + offset})
		} else {
			x--
			rev = append(rev, edit{opDel, x + offset, y + offset})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{opEqual, x + offset, y + offset})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// replaceAll deletes all of a and inserts all of b.
func replaceAll(n, m, offset int) []edit {
	out := make([]edit, 0, n+m)
	for i := 0; i < n; i++ {
		out = append(out, edit{opDel, offset + i, offset})
	}
	for j := 0; j < m; j++ {
		out = append(out, edit{opIns, offset + n, offset + j})
	}
	return out
}

// unifiedDiff returns the unified diff of a and b with ctx lines of context,
// or "" if they are equal.
func Unified(nameA, nameB, a, b string, ctx int) string {
	la, lb := splitLines(a), splitLines(b)
	edits := diffLines(la, lb)
	var sb strings.Builder
	i := 0
	for i < len(edits) {
		// Find the next change.
		for i < len(edits) && edits[i].kind == opEqual {
			i++
		}
		if i == len(edits) {
			break
		}
		start := max(i-ctx, 0)
		// Extend the hunk while changes are close enough to merge.
		end := i
		for end < len(edits) {
			if edits[end].kind != opEqual {
				end++
				continue
			}
			run := end
			for run < len(edits) && edits[run].kind == opEqual {
				run++
			}
			if run == len(edits) || run-end > 2*ctx {
				end = min(end+ctx, len(edits))
				break
			}
			end = run
		}
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
		}
		writeHunk(&sb, edits[start:end], la, lb)
		i = end
	}
	return sb.String()
}

func writeHunk(sb *strings.Builder, h []edit, la, lb []string) {
	aStart, bStart := h[0].a, h[0].b
	var aCount, bCount int
	for _, e := range h {
		switch e.kind {
		case opEqual:
			aCount++
			bCount++
		case opDel:
			aCount++
		case opIns:
			bCount++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
	for _, e := range h {
		var line string
		switch e.kind {
		case opEqual, opDel:
			line = la[e.a]
		case opIns:
			line = lb[e.b]
		}
		sb.WriteByte(byte(e.kind))
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a range as unified diff does: "start,count" (1-based),
// "start" for one line, and the line before for an empty range.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
