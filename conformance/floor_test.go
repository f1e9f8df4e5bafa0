package conformance

import (
	"slices"
	"testing"
)

// TestFloorCasesExist: every case the floor pass or a pass keeping one
// capability names is a case of the suite, the floor pass runs every case
// the others do, and every capability has a pass but FileSnapshotter's.
func TestFloorCasesExist(t *testing.T) {
	for _, name := range floorCases {
		if floorCase(name) == nil {
			t.Errorf("floor: no case %q", name)
		}
	}
	for _, c := range capabilities {
		names := capabilityCases[c]
		if len(names) == 0 && c != capFileSnapshotter {
			t.Errorf("%s: no case keeps it", c)
		}
		for _, name := range names {
			if floorCase(name) == nil {
				t.Errorf("%s: no case %q", c, name)
			}
			if !slices.Contains(floorCases, name) {
				t.Errorf("%s: %q is not in the floor pass", c, name)
			}
		}
	}
}
