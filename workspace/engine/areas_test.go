package engine

import "testing"

func TestAreasOverlapOnSegmentBoundaries(t *testing.T) {
	for _, c := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"src/api/"}, []string{"src/api/x.go"}, true},
		{[]string{"src/api"}, []string{"src/api/"}, true},
		{[]string{"go.mod"}, []string{"go.mod"}, true},
		{[]string{"src/api/"}, []string{"src/apix/"}, false},
		{[]string{"src/api/x.go"}, []string{"src/api/y.go"}, false},
		{nil, []string{"src/"}, false},
		{[]string{"docs/", "src/"}, []string{"web/", "src/a/b.go"}, true},
	} {
		if got := areasOverlap(c.a, c.b); got != c.want {
			t.Errorf("areasOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := areasOverlap(c.b, c.a); got != c.want {
			t.Errorf("areasOverlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
	for _, ok := range []string{"src/", "src/api/x.go", "go.mod"} {
		if err := checkArea(ok); err != nil {
			t.Errorf("checkArea(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "/etc", "../x", "a//b", "a\\b", "-\n"} {
		if err := checkArea(bad); err == nil {
			t.Errorf("checkArea(%q) accepted it", bad)
		}
	}
}
