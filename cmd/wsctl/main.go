// Command wsctl is the command-line tool of agentspace: it reads and writes a
// shared workspace (artifacts, tasks, notes, locks, the event log) for people
// and for shell-driven agents, migrates its schema, and moves a whole
// workspace between backends with export and import.
//
// Every command takes --json for machine-readable output. Exit codes a script
// can branch on:
//
//	0 ok
//	1 other error
//	2 usage: bad flags or arguments, bad input (ErrInvalid, ErrTooLarge), no actor for a write
//	3 conflict: a version condition failed (ErrConflict), or the name or key exists (ErrAlreadyExists)
//	4 locked: a lease stands in the way (ErrLocked, ErrStaleFence, ErrNotHolder, ErrLockLost)
//	5 not found (ErrNotFound)
//	6 no task ready to claim (ErrNoTask)
//	7 forbidden by the workspace's policy (ErrForbidden)
//	8 no workspace where the DSN points (ErrNoWorkspace): only init, import and migrate up/goto create one
//	9 verify or restore found the event chain or an artifact's content broken
//	10 unauthorized: a server wants a token it knows (AGENTSPACE_TOKEN)
//	11 paused: the actor's writes are refused until it is resumed (ErrPaused)
//	75 unavailable: the database or the server cannot be reached now; try again (ErrUnavailable)
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
