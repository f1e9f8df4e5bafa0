package workspace

import "strings"

// MaxAreas is the most areas a task may declare.
const MaxAreas = 256

// ValidateArea reports whether area is a usable task area: a path as
// ValidateName accepts it, optionally ending in '/' (a directory).
func ValidateArea(area string) error {
	return checkName("areas", strings.TrimSuffix(area, "/"))
}

// AreasOverlap reports whether some area of a and some area of b may name
// the same file: they are equal, or one is a directory prefix of the other
// on a segment boundary ("src/api" and "src/api/", "src/api/x.go";
// not "src/apix"). Tasks without areas overlap nothing: nothing is known.
func AreasOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if areaContains(x, y) || areaContains(y, x) {
				return true
			}
		}
	}
	return false
}

// areaContains reports whether path y is x or lies under x.
func areaContains(x, y string) bool {
	x, y = strings.TrimSuffix(x, "/"), strings.TrimSuffix(y, "/")
	return x == y || strings.HasPrefix(y, x+"/")
}
