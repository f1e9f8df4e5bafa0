// Package dirwatchtest holds what tests of file watching share: a count of
// the process's inotify descriptors (Linux's /proc).
package dirwatchtest

import (
	"os"
	"path/filepath"
	"testing"
)

// InotifyFDs counts this process's open inotify descriptors.
func InotifyFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("dirwatchtest: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
