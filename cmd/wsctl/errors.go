package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Exit codes: the contract with scripts. See the package comment. Those
// of an error of the workspace or a server are the wire package's error
// table's (wire.ExitCodeOf); the rest are wsctl's own.
const (
	exitOK       = 0
	exitError    = wire.ExitError
	exitUsage    = wire.ExitUsage
	exitConflict = wire.ExitConflict
	exitLocked   = wire.ExitLocked
	exitNotFound = wire.ExitNotFound
	exitNoTask   = wire.ExitNoTask
	// exitForbidden: the workspace's policy refused it (ErrForbidden).
	exitForbidden = wire.ExitForbidden
	exitNoStore   = wire.ExitNoStore
	// exitUnauthorized: a server refused the request for want of a
	// token it knows (HTTP 401): no AGENTSPACE_TOKEN, or an unknown,
	// revoked or expired one.
	exitUnauthorized = wire.ExitUnauthorized
	// exitPaused: a write of a paused actor was refused (ErrPaused); ack
	// the pause message and wait to be resumed.
	exitPaused = wire.ExitPaused
	// exitUnavailable: the store (or the server) cannot be reached now;
	// try again (EX_TEMPFAIL of sysexits.h).
	exitUnavailable = wire.ExitUnavailable
)

// cliError is an error with the exit code it maps to and, optionally, what
// the user should do about it.
type cliError struct {
	code int
	err  error
	hint string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// usageErrorf is a usage error (exit 2) whose message says what to do.
func usageErrorf(format string, args ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// inputFileError classifies a failure to read a file named on the command
// line: a file that is not there, or not ours to read, is bad input (exit 2),
// as the exit-code table promises; any other I/O error stays exit 1.
func inputFileError(file string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
		return &cliError{code: exitUsage, err: err, hint: "name a readable file, or '-' for stdin"}
	}
	return fmt.Errorf("reading %s: %w", file, err)
}

// classify maps err to its exit code, from the error table by its problem
// code (wire.ExitCodeOf), and a hint, by that code too. Errors that are
// already classified keep theirs; an error outside the table exits 1.
func classify(err error) error {
	var ce *cliError
	if errors.As(err, &ce) {
		return err
	}
	c := &cliError{code: exitError, err: err}
	// The merge queue's refusal matches ErrConflict, but nothing of the
	// caller's conflicts: the queue must run.
	if checkout := (*gitwork.CheckoutError)(nil); errors.As(err, &checkout) {
		c.hint = "run the queue with 'wsctl merge run'"
		return c
	}
	p, ok := wire.ProblemOf(err)
	if !ok {
		switch {
		case errors.Is(err, context.Canceled):
			c.err = errors.New("interrupted")
		case errors.Is(err, context.DeadlineExceeded):
			c.hint = "the timeout ran out"
		}
		return c
	}
	c.code = wire.ExitCodeOf(p.Code)
	c.hint = hintOf(err, p)
	return c
}

// hintOf is what to do about err, whose problem is p: the wsctl command
// to run, which a library error cannot name.
func hintOf(err error, p *wire.Problem) string {
	switch p.Code {
	case wire.CodePaused:
		return "'wsctl inbox --unacked' shows the pause message, 'wsctl ack ID' acks it"
	case wire.CodeConflict:
		if p.Current > 0 {
			return fmt.Sprintf("re-read it and retry with --if-version %d", p.Current)
		}
	case wire.CodeLocked:
		if errors.As(err, new(*workspace.LockedError)) {
			return "retry after it is released or expires (lock acquire --wait waits for it)"
		}
	case wire.CodeStaleFence:
		return "your lease was taken over: acquire the lock again and write with the new token"
	case wire.CodeLockLost:
		return "the lease or claim is no longer yours: acquire (or claim) again"
	case wire.CodeNoWorkspace:
		return "create one with 'wsctl init', or point wsctl at yours with --dsn, AGENTSPACE_DSN or agentspace.toml ('wsctl config' shows which it used)"
	case wire.CodeSchema:
		var schema *workspace.SchemaError
		switch {
		case !errors.As(err, &schema):
		case schema.Dirty:
			return fmt.Sprintf("run 'wsctl migrate force %d' once the store is checked", schema.Current)
		case schema.Current < schema.Want:
			return "run 'wsctl migrate up'"
		}
	case wire.CodeForbidden:
		// Only a policy's refusal names the rule it consulted; a token's
		// (impersonation, admin rights) is not the policy's to explain.
		if p.Rule != "" {
			return "the workspace's policy does not let you: 'wsctl policy show' lists the roles, 'wsctl policy check' explains"
		}
	case wire.CodeUnauthorized:
		return "set AGENTSPACE_TOKEN to a token of this server (on its host, 'wsctl token create --actor NAME' makes one)"
	case wire.CodeNoTask:
		return "add one with 'wsctl task add', or wait for one with 'wsctl task claim --wait'"
	case wire.CodeRewound:
		// The log lost events up to that seq (a failover to a replica
		// that lacked them) or the seq is another log's.
		return "with wsctl: 'wsctl status' re-reads the state, 'wsctl events --follow' follows from the head, '--after 0' reads the whole log"
	case wire.CodeUnavailable:
		return "the database cannot be reached now (down, restarting or failing over): try again"
	case wire.CodeCompacted:
		if errors.As(err, new(*workspace.CompactedError)) {
			return fmt.Sprintf("re-read the current state, then follow from --after %d", p.Floor-1)
		}
	}
	return ""
}

// report turns an error returned by the command tree into the exit code
// and the one line printed on stderr, with every password hidden.
func (a *app) report(err error) (int, string) {
	var ce *cliError
	if !errors.As(err, &ce) {
		// Cobra's own errors: unknown commands, flags, wrong argument counts.
		ce = &cliError{code: exitUsage, err: err}
		if !strings.Contains(err.Error(), "--help") {
			ce.hint = "see 'wsctl --help'"
		}
	}
	msg := ce.err.Error()
	if a.dsn != "" {
		msg = driver.RedactError(ce.err, a.dsn).Error()
	}
	if ce.hint != "" {
		msg += ": " + ce.hint
	}
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
	return ce.code, msg
}

// problemFor is the problem the API answers err with, from wire's one
// table; an error outside it is internal, its detail set by the caller.
func problemFor(err error) *wire.Problem {
	if p, ok := wire.ProblemOf(err); ok {
		return p
	}
	return wire.NewProblem(wire.CodeInternal, "")
}

// printProblem reports err on stderr, for --json, as the API's problem
// document (application/problem+json, one line): the same code and typed
// fields a client of wsctl serve gets. Its detail is msg, the line wsctl
// prints otherwise, with passwords hidden and the hint.
func (a *app) printProblem(err error, code int, msg string) {
	var inner error = err
	var ce *cliError
	if errors.As(err, &ce) {
		inner = ce.err
	}
	p := problemFor(inner)
	if p.Code == wire.CodeInternal && code == exitUsage {
		// cobra's own errors (flags, arguments, commands) are bad input.
		p = problemFor(workspace.ErrInvalid)
	}
	p.Detail = msg
	enc := json.NewEncoder(a.stderr)
	enc.SetEscapeHTML(false)
	if enc.Encode(p) != nil {
		fmt.Fprintln(a.stderr, "wsctl: "+msg)
	}
}
