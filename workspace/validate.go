package workspace

import (
	"strings"

	"github.com/agentspace/agentspace/internal/printable"
)

// ValidateName reports whether name is a usable artifact name: a relative,
// slash-separated path of printable UTF-8 with no empty, "." or ".."
// segments and no backslashes.
func ValidateName(name string) error { return checkName("name", name) }

func checkName(field, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if len(name) > MaxNameLen {
		return invalid(field, "longer than %d bytes", MaxNameLen)
	}
	if err := checkPrintable(field, name, false); err != nil {
		return err
	}
	if strings.ContainsRune(name, '\\') {
		return invalid(field, "%q contains a backslash: use / between segments", name)
	}
	if strings.HasPrefix(name, "/") {
		return invalid(field, "%q is absolute: names are relative paths", name)
	}
	if len(name) >= 2 && name[1] == ':' {
		return invalid(field, "%q looks like a drive path", name)
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return invalid(field, "%q has an empty segment", name)
		case ".", "..":
			return invalid(field, "%q has a %q segment", name, seg)
		}
		if strings.TrimSpace(seg) != seg {
			return invalid(field, "%q has a segment with leading or trailing space", name)
		}
	}
	return nil
}

// checkPrintable rejects invalid UTF-8, NUL and control characters (newlines
// and tabs too unless multiline).
func checkPrintable(field, s string, multiline bool) error {
	if p := printable.Problem(s, multiline); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}
