package main

import (
	"fmt"
	"time"
)

// now is the clock human output measures relative times against.
var now = time.Now

// when formats t for people: the UTC stamp, then how far it is from now,
// e.g. "2026-05-01T10:00:00Z (in 9m)" or "... (3m ago)".
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return stamp(t) + " (" + relative(t, now()) + ")"
}

// relative says how far t is from ref in one rounded-down unit: "now",
// "in 9m", "3m ago", "2h ago", "5d ago".
func relative(t, ref time.Time) string {
	d := t.Sub(ref)
	future := d > 0
	if !future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}
