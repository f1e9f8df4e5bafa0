package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// NewProblem is the problem of the given code, with its HTTP status.
func NewProblem(code, detail string) *Problem {
	st := http.StatusInternalServerError
	if r := rowOf[code]; r != nil {
		st = r.status
	}
	return &Problem{Type: "urn:agentspace:problem:" + code, Title: http.StatusText(st), Status: st, Detail: detail, Code: code}
}

// ProblemOf maps err to its problem by the error table: the first typed
// error of the table that err holds, else the first sentinel it matches.
// It returns nil, false for an error outside the known set, which the
// caller answers as internal without echoing its text (a driver's error
// may name a host or a file).
func ProblemOf(err error) (*Problem, bool) {
	var p *Problem
	if errors.As(err, &p) {
		return p, true
	}
	var be *workspace.BatchError
	if errors.As(err, &be) {
		p, ok := ProblemOf(be.Err)
		if ok {
			i := be.Index
			p.BatchIndex = &i
		}
		return p, ok
	}
	for _, r := range errorTable {
		if r.typed == nil {
			continue
		}
		if p, ok := r.typed.encode(r.code, err); ok {
			return p, true
		}
	}
	for _, r := range errorTable {
		if r.sentinel != nil && errors.Is(err, r.sentinel) {
			return NewProblem(r.code, err.Error()), true
		}
	}
	return nil, false
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

// typed is the error p carries by its row: the typed error, when the row
// has one and p carries it, else a *StatusError matching the row's
// sentinel (none for a code outside the table).
func (p *Problem) typed(status int) error {
	var sentinel error
	if r := rowOf[p.Code]; r != nil {
		if r.typed != nil && r.typed.decode != nil {
			if err, ok := r.typed.decode(p); ok {
				return err
			}
		}
		sentinel = r.sentinel
	}
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
