package textdiff

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnifiedDiffOfEqualTextsIsEmpty(t *testing.T) {
	assert.Equal(t, "", Unified("a", "b", "x\ny\n", "x\ny\n", 3))
}

func TestUnifiedDiffShowsChangedLineWithContext(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n"
	want := "--- f@1\n+++ f@2\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
	assert.Equal(t, want, Unified("f@1", "f@2", a, b, 3))
}

func TestUnifiedDiffSplitsDistantChangesIntoHunks(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < 20; i++ {
		line := string(rune('a'+i)) + "\n"
		a.WriteString(line)
		if i == 1 || i == 18 {
			line = "X\n"
		}
		b.WriteString(line)
	}
	got := Unified("a", "b", a.String(), b.String(), 3)
	assert.Equal(t, 2, strings.Count(got, "@@ -"), got)
	assert.Contains(t, got, "@@ -1,5 +1,5 @@\n a\n-b\n+X\n c\n d\n e\n")
	assert.Contains(t, got, "@@ -16,5 +16,5 @@\n p\n q\n r\n-s\n+X\n t\n")
}

func TestUnifiedDiffMarksMissingFinalNewline(t *testing.T) {
	got := Unified("a", "b", "x\n", "x\ny", 3)
	assert.Equal(t, "--- a\n+++ b\n@@ -1 +1,2 @@\n x\n+y\n\\ No newline at end of file\n", got)
}

func TestUnifiedDiffFromEmpty(t *testing.T) {
	got := Unified("a", "b", "", "x\ny\n", 3)
	assert.Equal(t, "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n", got)
}

func TestDiffLinesAppliesToTarget(t *testing.T) {
	cases := [][2]string{
		{"a\nb\nc\nd\n", "b\nc\ne\nd\nf\n"},
		{"x\n", ""},
		{"a\na\nb\na\n", "a\nb\na\na\n"},
		{"1\n2\n3\n", "3\n2\n1\n"},
	}
	for _, c := range cases {
		la, lb := splitLines(c[0]), splitLines(c[1])
		var rebuiltA, rebuiltB []string
		for _, e := range diffLines(la, lb) {
			switch e.kind {
			case opEqual:
				assert.Equal(t, la[e.a], lb[e.b])
				rebuiltA = append(rebuiltA, la[e.a])
				rebuiltB = append(rebuiltB, lb[e.b])
			case opDel:
				rebuiltA = append(rebuiltA, la[e.a])
			case opIns:
				rebuiltB = append(rebuiltB, lb[e.b])
			}
		}
		assert.Equal(t, c[0], strings.Join(rebuiltA, ""))
		assert.Equal(t, c[1], strings.Join(rebuiltB, ""))
	}
}

// TestDiffLinesIsMinimal checks, on random texts from a fixed seed, that
// the edit script rebuilds both texts and keeps a longest common
// subsequence (computed by dynamic programming).
func TestDiffLinesIsMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randLines := func() []string {
		n := rng.IntN(30)
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a'+rng.IntN(4))) + "\n"
		}
		return out
	}
	for i := 0; i < 500; i++ {
		a, b := randLines(), randLines()
		kept := 0
		var ra, rb []string
		for _, e := range diffLines(a, b) {
			switch e.kind {
			case opEqual:
				require.Equal(t, a[e.a], b[e.b])
				ra, rb = append(ra, a[e.a]), append(rb, b[e.b])
				kept++
			case opDel:
				ra = append(ra, a[e.a])
			case opIns:
				rb = append(rb, b[e.b])
			}
		}
		require.Equal(t, strings.Join(a, ""), strings.Join(ra, ""), "case %d", i)
		require.Equal(t, strings.Join(b, ""), strings.Join(rb, ""), "case %d", i)
		require.Equal(t, lcsLen(a, b), kept, "case %d: %q -> %q", i, a, b)
	}
}

func lcsLen(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestDiffOfVeryDifferentTextsFallsBackToAReplacement(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < maxEditCost; i++ {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	got := Unified("a", "b", a.String(), b.String(), 3)
	assert.True(t, strings.HasPrefix(got, fmt.Sprintf("--- a\n+++ b\n@@ -1,%d +1,%d @@\n-a0\n", maxEditCost, maxEditCost)), got[:80])
	assert.Equal(t, 2*maxEditCost, strings.Count(got, "\n")-3)
}
