package workspace

import "strings"

// ValidateArea reports whether area is a usable task area: a path as
// ValidateName accepts it, optionally ending in '/' (a directory).
func ValidateArea(area string) error {
	return checkName("areas", strings.TrimSuffix(area, "/"))
}
