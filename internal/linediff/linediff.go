// Package linediff computes line diffs of two texts: an edit script (Myers'
// O(ND) algorithm) and its unified form. wsctl artifact diff and the
// dashboard's diff view both use it, so they show the same changes.
package linediff

import (
	"fmt"
	"strings"
)

// A line diff of our own rather than a dependency: it is ~150 lines, its
// users need only an edit script and unified output of two texts, and the
// well-known Go diff libraries either pull in more than that or are
// internal to the Go tree.

// maxEditCost bounds the Myers search; beyond it the diff falls back to
// "replace everything in between", which is still a correct diff.
const maxEditCost = 2000

// Op is what an Edit does to one line.
type Op byte

// The three ops, each the character that starts its line in a unified diff.
const (
	Equal  Op = ' '
	Delete Op = '-'
	Insert Op = '+'
)

// Edit is one step of an edit script: a line kept, deleted or inserted.
type Edit struct {
	Kind Op
	A, B int // line index in a (for equal and del) and in b (for equal and ins)
}

// Split splits s into lines that keep their "\n"; the last line may lack it.
func Split(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Lines returns an edit script turning a into b.
func Lines(a, b []string) []Edit {
	var out []Edit
	// Common prefix and suffix cost nothing and shrink the search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		out = append(out, Edit{Equal, pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf], pre)...)
	for i := suf; i > 0; i-- {
		out = append(out, Edit{Equal, len(a) - i, len(b) - i})
	}
	return out
}

// myers finds a shortest edit script of a into b (offset is the index of
// a[0] and b[0] in the whole texts).
func myers(a, b []string, offset int) []Edit {
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
	var rev []Edit
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
			rev = append(rev, Edit{Equal, x + offset, y + offset})
		}
		if x == px {
			y--
			rev = append(rev, Edit{Insert, x + offset, y + offset})
		} else {
			x--
			rev = append(rev, Edit{Delete, x + offset, y + offset})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, Edit{Equal, x + offset, y + offset})
	}
	out := make([]Edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// replaceAll deletes all of a and inserts all of b.
func replaceAll(n, m, offset int) []Edit {
	out := make([]Edit, 0, n+m)
	for i := 0; i < n; i++ {
		out = append(out, Edit{Delete, offset + i, offset})
	}
	for j := 0; j < m; j++ {
		out = append(out, Edit{Insert, offset + n, offset + j})
	}
	return out
}

// Unified returns the unified diff of a and b with ctx lines of context,
// or "" if they are equal.
func Unified(nameA, nameB, a, b string, ctx int) string {
	la, lb := Split(a), Split(b)
	edits := Lines(la, lb)
	var sb strings.Builder
	i := 0
	for i < len(edits) {
		// Find the next change.
		for i < len(edits) && edits[i].Kind == Equal {
			i++
		}
		if i == len(edits) {
			break
		}
		start := max(i-ctx, 0)
		// Extend the hunk while changes are close enough to merge.
		end := i
		for end < len(edits) {
			if edits[end].Kind != Equal {
				end++
				continue
			}
			run := end
			for run < len(edits) && edits[run].Kind == Equal {
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

func writeHunk(sb *strings.Builder, h []Edit, la, lb []string) {
	aStart, bStart := h[0].A, h[0].B
	var aCount, bCount int
	for _, e := range h {
		switch e.Kind {
		case Equal:
			aCount++
			bCount++
		case Delete:
			aCount++
		case Insert:
			bCount++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
	for _, e := range h {
		var line string
		switch e.Kind {
		case Equal, Delete:
			line = la[e.A]
		case Insert:
			line = lb[e.B]
		}
		sb.WriteByte(byte(e.Kind))
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
