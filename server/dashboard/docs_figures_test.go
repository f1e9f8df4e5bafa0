package dashboard

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocsStateTheFlowBounds: the bounds docs/dashboard.md states for the
// timeline and the charts are the code's, and the benchmark table it
// quotes has a row for each size BenchmarkFlow measures, the largest
// being the bound itself (1,000,000 events), so the bound is measured,
// not assumed.
func TestDocsStateTheFlowBounds(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "dashboard.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	num := func(re string) int {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/dashboard.md no longer states %s: update it and this test together", re)
		}
		n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		re   string
		want int
	}{
		{`at most ([\d,]+) events per render`, maxScan},
		{`fixed by the (\d+) chart intervals`, flowBuckets},
		{`at most ([\d,]+) bars`, maxBars},
		{`bars, ([\d,]+) marks`, maxMarks},
		{`marks, ([\d,]+) lanes`, maxLanes},
		{`and ([\d,]+) contended subjects kept`, maxContention},
		{`the charts keep their (\d+) intervals`, flowBuckets},
	} {
		if got := num(c.re); got != c.want {
			t.Errorf("docs/dashboard.md states %d for %s; the code has %d", got, c.re, c.want)
		}
	}
	var rows []int
	for _, m := range regexp.MustCompile(`\| ([\d,]+) \| [\d.]+ m?s \| [\d.]+ m?s \|`).FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		rows = append(rows, n)
	}
	if !slices.Equal(rows, flowBenchSizes) {
		t.Errorf("docs/dashboard.md tabulates BenchmarkFlow at %v events; it measures %v", rows, flowBenchSizes)
	}
	if slices.Max(flowBenchSizes) != maxScan {
		t.Errorf("BenchmarkFlow's largest day is %d events, the bound is %d", slices.Max(flowBenchSizes), maxScan)
	}
}
