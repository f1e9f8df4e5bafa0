package wire

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// The error table: per problem code, its HTTP status, the sentinel it
// matches, wsctl's exit code and, for a code that carries a typed error of
// the workspace, how that error goes into a Problem and comes back out,
// declared once per code. ProblemOf and DecodeError (so the server, the
// remote backend and wsctl's --json), MCP's error class (which is the code
// itself) and wsctl's exit code (ExitCodeOf) all read this table; the
// clients in other languages branch on the same codes. Adding an error of
// package workspace is its row here; TestEveryWorkspaceErrorIsInTheTable
// fails while a sentinel or a typed error of workspace/errors.go has none.
//
// Invariant: decoding what a row encodes gives back an error that matches
// the same sentinel and, for a typed error with a decoder, the same error
// field for field (TestEveryErrorSurvivesTheWire).

// Exit codes of wsctl: the contract with scripts (cmd/wsctl's package
// comment lists them). A code's exit is its row's; ExitError is the rest.
const (
	ExitError    = 1
	ExitUsage    = 2
	ExitConflict = 3
	ExitLocked   = 4
	ExitNotFound = 5
	ExitNoTask   = 6
	// ExitForbidden: the workspace's policy (or the server) refused it.
	ExitForbidden = 7
	// ExitNoStore: no workspace where the DSN points.
	ExitNoStore = 8
	// ExitUnauthorized: a server wants a token it knows (HTTP 401).
	ExitUnauthorized = 10
	// ExitPaused: the actor's writes are refused until it is resumed.
	ExitPaused = 11
	// ExitUnavailable: the store or the server cannot be reached now; try
	// again (EX_TEMPFAIL of sysexits.h).
	ExitUnavailable = 75
)

// errorRow is one problem code's entry.
type errorRow struct {
	code   string
	status int
	// sentinel is the error the code stands for: an error matching it
	// (errors.Is) gets the code, and a decoded answer of the code that
	// carries no typed error matches it. nil for the HTTP layer's own
	// codes, which no workspace error has.
	sentinel error
	exit     int
	// typed is the typed error of the code, if it has one.
	typed *typedCodec
}

// typedCodec is one typed error's encode/decode pair.
type typedCodec struct {
	typ reflect.Type
	// encode is the problem of code for err when err holds the typed
	// error (and the row's predicate holds); nil, false otherwise.
	encode func(code string, err error) (*Problem, bool)
	// decode rebuilds the typed error from p; false when p carries none
	// (the row's sentinel stands then). nil for a typed error that is not
	// rebuilt (its fields do not cross the wire).
	decode func(p *Problem) (error, bool)
}

// typed declares typed error E: match (nil for always) says whether an E
// is this row's (one type can be two codes' by a field, as InvalidError
// is invalid's or too_large's); enc puts its fields into p, whose detail is
// already e.Error() (err is the whole chain, for a detail of its own); dec,
// when not nil, takes them back out, reporting false when p carries none.
func typed[E error](match func(e E) bool, enc func(p *Problem, e E, err error), dec func(p *Problem) (E, bool)) *typedCodec {
	c := &typedCodec{
		typ: reflect.TypeFor[E](),
		encode: func(code string, err error) (*Problem, bool) {
			var e E
			if !errors.As(err, &e) || (match != nil && !match(e)) {
				return nil, false
			}
			p := NewProblem(code, e.Error())
			enc(p, e, err)
			return p, true
		},
	}
	if dec != nil {
		c.decode = func(p *Problem) (error, bool) { return dec(p) }
	}
	return c
}

// always decodes a typed error from every problem of its code.
func always[E error](f func(p *Problem) E) func(p *Problem) (E, bool) {
	return func(p *Problem) (E, bool) { return f(p), true }
}

// errorTable is the table. The order is the order of the match: the typed
// errors first, in row order, then the sentinels, in row order.
var errorTable = []errorRow{
	{code: CodeNotFound, status: http.StatusNotFound, sentinel: workspace.ErrNotFound, exit: ExitNotFound,
		typed: typed(nil,
			func(p *Problem, e *workspace.VersionRemovedError, _ error) {
				p.Name, p.Version, p.Oldest = e.Name, e.Version, e.Oldest
			},
			func(p *Problem) (*workspace.VersionRemovedError, bool) {
				return &workspace.VersionRemovedError{Name: p.Name, Version: p.Version, Oldest: p.Oldest}, p.Oldest > 0
			})},
	{code: CodeAlreadyExists, status: http.StatusConflict, sentinel: workspace.ErrAlreadyExists, exit: ExitConflict},
	{code: CodeNotHolder, status: http.StatusConflict, sentinel: workspace.ErrNotHolder, exit: ExitLocked},
	{code: CodeLockLost, status: http.StatusConflict, sentinel: workspace.ErrLockLost, exit: ExitLocked},
	{code: CodeNoTask, status: http.StatusNotFound, sentinel: workspace.ErrNoTask, exit: ExitNoTask},
	{code: CodeConflict, status: http.StatusConflict, sentinel: workspace.ErrConflict, exit: ExitConflict,
		typed: typed(nil,
			func(p *Problem, e *workspace.ConflictError, _ error) {
				p.Subject, p.Expected, p.Current = e.Subject, e.Expected, e.Current
			},
			always(func(p *Problem) *workspace.ConflictError {
				return &workspace.ConflictError{Subject: p.Subject, Expected: p.Expected, Current: p.Current}
			}))},
	{code: CodeLocked, status: http.StatusLocked, sentinel: workspace.ErrLocked, exit: ExitLocked,
		typed: typed(nil,
			func(p *Problem, e *workspace.LockedError, _ error) {
				p.Resource, p.Holder, p.Token, p.ExpiresAt = e.Resource, e.Holder, e.Token, e.ExpiresAt
			},
			always(func(p *Problem) *workspace.LockedError {
				return &workspace.LockedError{Resource: p.Resource, Holder: p.Holder, Token: p.Token, ExpiresAt: p.ExpiresAt}
			}))},
	{code: CodeStaleFence, status: http.StatusConflict, sentinel: workspace.ErrStaleFence, exit: ExitLocked,
		typed: typed(nil,
			func(p *Problem, e *workspace.StaleFenceError, _ error) {
				p.Resource, p.Fence, p.Newest = e.Resource, e.Fence, e.Newest
			},
			always(func(p *Problem) *workspace.StaleFenceError {
				return &workspace.StaleFenceError{Resource: p.Resource, Fence: p.Fence, Newest: p.Newest}
			}))},
	{code: CodeCompacted, status: http.StatusGone, sentinel: workspace.ErrCompacted, exit: ExitError,
		typed: typed(nil,
			func(p *Problem, e *workspace.CompactedError, _ error) {
				p.Requested, p.Floor = e.Requested, e.Floor
			},
			always(func(p *Problem) *workspace.CompactedError {
				return &workspace.CompactedError{Requested: p.Requested, Floor: p.Floor}
			}))},
	{code: CodeRewound, status: http.StatusGone, sentinel: workspace.ErrRewound, exit: ExitError},
	// A paused actor is a held resource, as a leased one is: wait (for
	// the resume), then retry. The code tells the two apart.
	{code: CodePaused, status: http.StatusLocked, sentinel: workspace.ErrPaused, exit: ExitPaused,
		typed: typed(nil,
			func(p *Problem, e *workspace.PausedError, _ error) {
				p.Actor, p.By, p.Since = e.Actor, e.By, e.Since
			},
			always(func(p *Problem) *workspace.PausedError {
				return &workspace.PausedError{Actor: p.Actor, By: p.By, Since: p.Since}
			}))},
	{code: CodeTooLarge, status: http.StatusRequestEntityTooLarge, sentinel: workspace.ErrTooLarge, exit: ExitUsage,
		typed: typed(func(e *workspace.InvalidError) bool { return e.TooLarge },
			func(p *Problem, e *workspace.InvalidError, _ error) {
				p.Field, p.Reason = e.Field, e.Reason
			},
			always(func(p *Problem) *workspace.InvalidError {
				return &workspace.InvalidError{Field: p.Field, Reason: p.Reason, TooLarge: true}
			}))},
	{code: CodeInvalid, status: http.StatusBadRequest, sentinel: workspace.ErrInvalid, exit: ExitUsage,
		typed: typed(func(e *workspace.InvalidError) bool { return !e.TooLarge },
			func(p *Problem, e *workspace.InvalidError, _ error) {
				p.Field, p.Reason = e.Field, e.Reason
			},
			always(func(p *Problem) *workspace.InvalidError {
				return &workspace.InvalidError{Field: p.Field, Reason: p.Reason}
			}))},
	{code: CodeSchema, status: http.StatusServiceUnavailable, sentinel: workspace.ErrSchema, exit: ExitError,
		typed: typed(nil,
			func(p *Problem, e *workspace.SchemaError, _ error) {
				p.Current, p.Want, p.Dirty = e.Current, e.Want, e.Dirty
			},
			always(func(p *Problem) *workspace.SchemaError {
				return &workspace.SchemaError{Current: p.Current, Want: p.Want, Dirty: p.Dirty}
			}))},
	{code: CodeNoWorkspace, status: http.StatusServiceUnavailable, sentinel: workspace.ErrNoWorkspace, exit: ExitNoStore,
		typed: typed(nil,
			func(p *Problem, e *workspace.NoWorkspaceError, _ error) {
				p.Where, p.Reason = e.Where, e.Reason
			},
			always(func(p *Problem) *workspace.NoWorkspaceError {
				return &workspace.NoWorkspaceError{Where: p.Where, Reason: p.Reason}
			}))},
	{code: CodeClosed, status: http.StatusServiceUnavailable, sentinel: workspace.ErrClosed, exit: ExitError},
	{code: CodeUnauthorized, status: http.StatusUnauthorized, sentinel: ErrUnauthorized, exit: ExitUnauthorized},
	// The server's refusals (a token's) and the policy's (a
	// *workspace.ForbiddenError, which alone names a rule) are one code.
	{code: CodeForbidden, status: http.StatusForbidden, sentinel: ErrForbidden, exit: ExitForbidden,
		typed: typed(nil,
			func(p *Problem, e *workspace.ForbiddenError, _ error) {
				p.Actor, p.Roles, p.Action, p.Object, p.Rule, p.Reason = e.Actor, e.Roles, e.Action, e.Object, e.Rule, e.Reason
			},
			func(p *Problem) (*workspace.ForbiddenError, bool) {
				return &workspace.ForbiddenError{Actor: p.Actor, Roles: p.Roles, Action: p.Action, Object: p.Object, Rule: p.Rule, Reason: p.Reason}, p.Action != ""
			})},
	// An *UnavailableError is encoded but not rebuilt: its cause names
	// hosts and users, so the client gets what failed, not where, and the
	// sentinel.
	{code: CodeUnavailable, status: http.StatusServiceUnavailable, sentinel: ErrUnavailable, exit: ExitUnavailable,
		typed: typed(nil,
			func(p *Problem, e *workspace.UnavailableError, err error) {
				p.Detail = strings.TrimSuffix(err.Error(), ": "+e.Cause.Error())
			}, nil)},

	// The HTTP layer's own codes: no workspace error has them.
	{code: CodeTimeout, status: http.StatusGatewayTimeout, exit: ExitError},
	{code: CodeNoRoute, status: http.StatusNotFound, exit: ExitError},
	{code: CodeUnsupported, status: http.StatusUnsupportedMediaType, exit: ExitError},
	{code: CodeTooMany, status: http.StatusTooManyRequests, exit: ExitError},
	{code: CodeInternal, status: http.StatusInternalServerError, exit: ExitError},
}

// rowOf indexes errorTable by code.
var rowOf = map[string]*errorRow{}

func init() {
	for i := range errorTable {
		r := &errorTable[i]
		if rowOf[r.code] != nil || r.status == 0 || r.exit == 0 {
			panic("wire: error code declared twice or without status and exit: " + r.code)
		}
		rowOf[r.code] = r
	}
}

// ExitCodeOf is wsctl's exit code for an error of the given problem code:
// its row's, or ExitError for a code outside the table.
func ExitCodeOf(code string) int {
	if r := rowOf[code]; r != nil {
		return r.exit
	}
	return ExitError
}

// TimeoutOf is the rule for a passed deadline, which the server and MCP
// both apply to an error outside the table: an error that is
// context.DeadlineExceeded is a timeout, whose problem carries detail; any
// other is nil.
func TimeoutOf(err error, detail string) *Problem {
	if !errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return NewProblem(CodeTimeout, detail)
}
