package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRelativeTimesRoundDownToOneUnit(t *testing.T) {
	ref := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{999 * time.Millisecond, "now"},
		{-999 * time.Millisecond, "now"},
		{9*time.Minute + 59*time.Second, "in 9m"},
		{-3*time.Minute - 10*time.Second, "3m ago"},
		{-45 * time.Second, "45s ago"},
		{90 * time.Minute, "in 1h"},
		{-47 * time.Hour, "47h ago"},
		{-72 * time.Hour, "3d ago"},
	} {
		assert.Equal(t, c.want, relative(ref.Add(c.d), ref), "%s", c.d)
	}
}
