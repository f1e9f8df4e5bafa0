package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Errors of the HTTP layer itself, beside the workspace's own set.
var (
	// ErrUnauthorized: the request presented no token where one is
	// required, or a token that is unknown, revoked or expired (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the token's actor may not do this: write as another
	// actor, or touch the records that hold tokens (403). It is the
	// workspace's own sentinel, so that the server's refusals and the
	// policy's (a *workspace.ForbiddenError) are one class to a client.
	ErrForbidden = workspace.ErrForbidden
	// ErrUnavailable: the server is shutting down, or its store cannot be
	// reached (503, with Retry-After); retry. It is the workspace's own
	// sentinel, so that a client sees one class for both.
	ErrUnavailable = workspace.ErrUnavailable
)

// Problem codes: the stable, machine-readable "code" of every error body.
// A client branches on the code, never on the status or the text.
const (
	CodeNotFound      = "not_found"
	CodeAlreadyExists = "already_exists"
	CodeConflict      = "conflict"
	CodeLocked        = "locked"
	CodeNotHolder     = "not_holder"
	CodeLockLost      = "lock_lost"
	CodeStaleFence    = "stale_fence"
	CodeNoTask        = "no_task"
	CodeCompacted     = "compacted"
	CodeInvalid       = "invalid"
	CodeTooLarge      = "too_large"
	CodeClosed        = "closed"
	CodeSchema        = "schema"
	CodeNoWorkspace   = "no_workspace"
	CodeUnauthorized  = "unauthorized"
	CodeForbidden     = "forbidden"
	CodeUnavailable   = "unavailable"
	CodeRewound       = "rewound"
	CodePaused        = "paused"
	CodeTimeout       = "timeout"
	CodeNoRoute       = "no_route"
	CodeUnsupported   = "unsupported_media_type"
	CodeTooMany       = "too_many"
	CodeInternal      = "internal"
)

// Problem is the body of every error answer: an RFC 9457 problem
// (application/problem+json) with a stable Code and the fields of the typed
// workspace error it carries, so that DecodeError rebuilds that error
// exactly. Fields that do not apply to the code are left out.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`

	// BatchIndex is set when the error is one op's of a batch.
	BatchIndex *int `json:"batch_index,omitempty"`

	// conflict
	Subject  workspace.Subject `json:"subject,omitzero"`
	Expected int64             `json:"expected,omitempty"`
	Current  int64             `json:"current,omitempty"`
	// locked, stale_fence
	Resource  string    `json:"resource,omitempty"`
	Holder    string    `json:"holder,omitempty"`
	Token     int64     `json:"token,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Fence     int64     `json:"fence,omitempty"`
	Newest    int64     `json:"newest,omitempty"`
	// compacted
	Requested int64 `json:"requested,omitempty"`
	Floor     int64 `json:"floor,omitempty"`
	// invalid, too_large
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
	// schema
	Want  int64 `json:"want,omitempty"`
	Dirty bool  `json:"dirty,omitempty"`
	// no_workspace
	Where string `json:"where,omitempty"`
	// not_found of an artifact version removed by retention
	Name    string `json:"name,omitempty"`
	Version int64  `json:"version,omitempty"`
	Oldest  int64  `json:"oldest,omitempty"`
	// forbidden by the policy (with reason)
	Actor  string   `json:"actor,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	Action string   `json:"action,omitempty"`
	Object string   `json:"object,omitempty"`
	Rule   string   `json:"rule,omitempty"`
	// paused (with actor): who paused the actor, and when
	By    string    `json:"by,omitempty"`
	Since time.Time `json:"since,omitzero"`
}

// Error returns the problem's detail.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

// GetStatus is the HTTP status huma writes the problem with.
func (p *Problem) GetStatus() int { return p.Status }

// GetHeaders gives a 503 its Retry-After (huma.HeadersError).
func (p *Problem) GetHeaders() http.Header {
	if p.Status != http.StatusServiceUnavailable {
		return nil
	}
	return http.Header{"Retry-After": {"1"}}
}

// ContentType makes huma send the problem as application/problem+json.
func (p *Problem) ContentType(string) string { return "application/problem+json" }

// statusOf is the one table from problem codes to HTTP statuses.
var statusOf = map[string]int{
	CodeNotFound:      http.StatusNotFound,
	CodeAlreadyExists: http.StatusConflict,
	CodeConflict:      http.StatusConflict,
	CodeLocked:        http.StatusLocked,
	CodeNotHolder:     http.StatusConflict,
	CodeLockLost:      http.StatusConflict,
	CodeStaleFence:    http.StatusConflict,
	CodeNoTask:        http.StatusNotFound,
	CodeCompacted:     http.StatusGone,
	CodeInvalid:       http.StatusBadRequest,
	CodeTooLarge:      http.StatusRequestEntityTooLarge,
	CodeClosed:        http.StatusServiceUnavailable,
	CodeSchema:        http.StatusServiceUnavailable,
	CodeNoWorkspace:   http.StatusServiceUnavailable,
	CodeUnauthorized:  http.StatusUnauthorized,
	CodeForbidden:     http.StatusForbidden,
	CodeUnavailable:   http.StatusServiceUnavailable,
	CodeRewound:       http.StatusGone,
	// A paused actor is a held resource, as a leased one is: wait (for
	// the resume), then retry. The code tells the two apart.
	CodePaused:      http.StatusLocked,
	CodeTimeout:     http.StatusGatewayTimeout,
	CodeNoRoute:     http.StatusNotFound,
	CodeUnsupported: http.StatusUnsupportedMediaType,
	CodeTooMany:     http.StatusTooManyRequests,
	CodeInternal:    http.StatusInternalServerError,
}

// NewProblem is the problem of the given code, with its HTTP status.
func NewProblem(code, detail string) *Problem {
	st := statusOf[code]
	if st == 0 {
		st = http.StatusInternalServerError
	}
	return &Problem{Type: "urn:agentspace:problem:" + code, Title: http.StatusText(st), Status: st, Detail: detail, Code: code}
}

// ProblemOf maps err to its problem: the one table from the workspace's
// typed errors (and this package's sentinels) to codes. It returns nil, false for an error
// outside the known set, which the caller answers as internal without
// echoing its text (a driver's error may name a host or a file).
func ProblemOf(err error) (*Problem, bool) {
	var p *Problem
	if errors.As(err, &p) {
		return p, true
	}
	var (
		be  *workspace.BatchError
		ce  *workspace.ConflictError
		le  *workspace.LockedError
		sfe *workspace.StaleFenceError
		cpe *workspace.CompactedError
		ie  *workspace.InvalidError
		se  *workspace.SchemaError
		nwe *workspace.NoWorkspaceError
		fe  *workspace.ForbiddenError
		vre *workspace.VersionRemovedError
		ue  *workspace.UnavailableError
		pe  *workspace.PausedError
	)
	if errors.As(err, &be) {
		p, ok := ProblemOf(be.Err)
		if ok {
			i := be.Index
			p.BatchIndex = &i
		}
		return p, ok
	}
	detail := err.Error()
	switch {
	case errors.As(err, &ce):
		p = NewProblem(CodeConflict, ce.Error())
		p.Subject, p.Expected, p.Current = ce.Subject, ce.Expected, ce.Current
	case errors.As(err, &le):
		p = NewProblem(CodeLocked, le.Error())
		p.Resource, p.Holder, p.Token, p.ExpiresAt = le.Resource, le.Holder, le.Token, le.ExpiresAt
	case errors.As(err, &sfe):
		p = NewProblem(CodeStaleFence, sfe.Error())
		p.Resource, p.Fence, p.Newest = sfe.Resource, sfe.Fence, sfe.Newest
	case errors.As(err, &cpe):
		p = NewProblem(CodeCompacted, cpe.Error())
		p.Requested, p.Floor = cpe.Requested, cpe.Floor
	case errors.As(err, &ie):
		code := CodeInvalid
		if ie.TooLarge {
			code = CodeTooLarge
		}
		p = NewProblem(code, ie.Error())
		p.Field, p.Reason = ie.Field, ie.Reason
	case errors.As(err, &se):
		p = NewProblem(CodeSchema, se.Error())
		p.Current, p.Want, p.Dirty = se.Current, se.Want, se.Dirty
	case errors.As(err, &nwe):
		p = NewProblem(CodeNoWorkspace, nwe.Error())
		p.Where, p.Reason = nwe.Where, nwe.Reason
	case errors.As(err, &fe):
		p = NewProblem(CodeForbidden, fe.Error())
		p.Actor, p.Roles, p.Action, p.Object, p.Rule, p.Reason = fe.Actor, fe.Roles, fe.Action, fe.Object, fe.Rule, fe.Reason
	case errors.As(err, &pe):
		p = NewProblem(CodePaused, pe.Error())
		p.Actor, p.By, p.Since = pe.Actor, pe.By, pe.Since
	case errors.As(err, &vre):
		p = NewProblem(CodeNotFound, vre.Error())
		p.Name, p.Version, p.Oldest = vre.Name, vre.Version, vre.Oldest
	case errors.Is(err, workspace.ErrNotFound):
		p = NewProblem(CodeNotFound, detail)
	case errors.Is(err, workspace.ErrAlreadyExists):
		p = NewProblem(CodeAlreadyExists, detail)
	case errors.Is(err, workspace.ErrNotHolder):
		p = NewProblem(CodeNotHolder, detail)
	case errors.Is(err, workspace.ErrLockLost):
		p = NewProblem(CodeLockLost, detail)
	case errors.Is(err, workspace.ErrNoTask):
		p = NewProblem(CodeNoTask, detail)
	case errors.Is(err, workspace.ErrConflict):
		p = NewProblem(CodeConflict, detail)
	case errors.Is(err, workspace.ErrLocked):
		p = NewProblem(CodeLocked, detail)
	case errors.Is(err, workspace.ErrStaleFence):
		p = NewProblem(CodeStaleFence, detail)
	case errors.Is(err, workspace.ErrCompacted):
		p = NewProblem(CodeCompacted, detail)
	case errors.Is(err, workspace.ErrRewound):
		p = NewProblem(CodeRewound, detail)
	case errors.Is(err, workspace.ErrPaused):
		p = NewProblem(CodePaused, detail)
	case errors.Is(err, workspace.ErrTooLarge):
		p = NewProblem(CodeTooLarge, detail)
	case errors.Is(err, workspace.ErrInvalid):
		p = NewProblem(CodeInvalid, detail)
	case errors.Is(err, workspace.ErrSchema):
		p = NewProblem(CodeSchema, detail)
	case errors.Is(err, workspace.ErrNoWorkspace):
		p = NewProblem(CodeNoWorkspace, detail)
	case errors.Is(err, workspace.ErrClosed):
		p = NewProblem(CodeClosed, detail)
	case errors.Is(err, ErrUnauthorized):
		p = NewProblem(CodeUnauthorized, detail)
	case errors.Is(err, ErrForbidden):
		p = NewProblem(CodeForbidden, detail)
	case errors.As(err, &ue):
		// The driver's cause names hosts and users: the client gets what failed, not where.
		p = NewProblem(CodeUnavailable, strings.TrimSuffix(detail, ": "+ue.Cause.Error()))
	case errors.Is(err, ErrUnavailable):
		p = NewProblem(CodeUnavailable, detail)
	default:
		return nil, false
	}
	return p, true
}

// DecodeError rebuilds the error an answer with the given status and
// problem body carries: the workspace's typed error for the workspace's
// codes (errors.Is and errors.As hold as they did on the server), one of
// this package's sentinels for the HTTP layer's, and a *StatusError for
// anything else, including a body that is not a problem at all.
func DecodeError(status int, body []byte) error {
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		return &StatusError{Status: status, Code: CodeInternal, Detail: truncate(string(body), 200)}
	}
	err := p.typed(status)
	if p.BatchIndex != nil {
		return &workspace.BatchError{Index: *p.BatchIndex, Err: err}
	}
	return err
}

func (p *Problem) typed(status int) error {
	switch p.Code {
	case CodeConflict:
		return &workspace.ConflictError{Subject: p.Subject, Expected: p.Expected, Current: p.Current}
	case CodeLocked:
		return &workspace.LockedError{Resource: p.Resource, Holder: p.Holder, Token: p.Token, ExpiresAt: p.ExpiresAt}
	case CodeStaleFence:
		return &workspace.StaleFenceError{Resource: p.Resource, Fence: p.Fence, Newest: p.Newest}
	case CodeCompacted:
		return &workspace.CompactedError{Requested: p.Requested, Floor: p.Floor}
	case CodeInvalid, CodeTooLarge:
		return &workspace.InvalidError{Field: p.Field, Reason: p.Reason, TooLarge: p.Code == CodeTooLarge}
	case CodeSchema:
		return &workspace.SchemaError{Current: p.Current, Want: p.Want, Dirty: p.Dirty}
	case CodeNoWorkspace:
		return &workspace.NoWorkspaceError{Where: p.Where, Reason: p.Reason}
	case CodePaused:
		return &workspace.PausedError{Actor: p.Actor, By: p.By, Since: p.Since}
	case CodeNotFound:
		if p.Oldest > 0 {
			return &workspace.VersionRemovedError{Name: p.Name, Version: p.Version, Oldest: p.Oldest}
		}
	case CodeForbidden:
		if p.Action != "" {
			return &workspace.ForbiddenError{Actor: p.Actor, Roles: p.Roles, Action: p.Action, Object: p.Object, Rule: p.Rule, Reason: p.Reason}
		}
	}
	sentinel := map[string]error{
		CodeNotFound:      workspace.ErrNotFound,
		CodeAlreadyExists: workspace.ErrAlreadyExists,
		CodeNotHolder:     workspace.ErrNotHolder,
		CodeLockLost:      workspace.ErrLockLost,
		CodeNoTask:        workspace.ErrNoTask,
		CodeClosed:        workspace.ErrClosed,
		CodeUnauthorized:  ErrUnauthorized,
		CodeForbidden:     ErrForbidden,
		CodeUnavailable:   ErrUnavailable,
		CodeRewound:       workspace.ErrRewound,
	}[p.Code]
	return &StatusError{Status: status, Code: p.Code, Detail: p.Detail, sentinel: sentinel}
}

// StatusError is an error answer that carries no typed workspace error
// beyond a sentinel: it matches that sentinel (workspace.ErrNotFound for
// code not_found, ErrUnauthorized for unauthorized, ...) with errors.Is.
type StatusError struct {
	Status   int
	Code     string
	Detail   string
	sentinel error
}

// Error gives the server's detail, prefixed by the sentinel it matches.
func (e *StatusError) Error() string {
	switch {
	case e.Detail != "":
		return e.Detail
	case e.sentinel != nil:
		return e.sentinel.Error()
	}
	return fmt.Sprintf("HTTP %d (%s)", e.Status, e.Code)
}

// Unwrap returns the sentinel the code stands for, if any.
func (e *StatusError) Unwrap() error { return e.sentinel }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
