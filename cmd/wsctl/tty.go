package main

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether stream is a terminal: a person, not a pipe or
// a file, is at the other end.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && f != nil && term.IsTerminal(int(f.Fd())) // #nosec G115 -- a file descriptor fits in an int
}

// checkStdinPiped refuses to read content from a terminal: wsctl would sit
// waiting for Ctrl-D while the user waits for wsctl. how says what to
// type instead.
func (a *app) checkStdinPiped(how string) error {
	if isTerminal(a.stdin) {
		return usageErrorf("the content comes from stdin, which is a terminal: %s", how)
	}
	return nil
}
