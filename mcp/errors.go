package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// Error classes: the "error" field of a failed tool call's structured
// content. They are the wire package's problem codes, the HTTP API's, so
// an agent that knows one surface knows the other.
const (
	ClassNotFound      = wire.CodeNotFound
	ClassAlreadyExists = wire.CodeAlreadyExists
	ClassConflict      = wire.CodeConflict
	ClassLocked        = wire.CodeLocked
	ClassNotHolder     = wire.CodeNotHolder
	ClassLockLost      = wire.CodeLockLost
	ClassStaleFence    = wire.CodeStaleFence
	ClassNoTask        = wire.CodeNoTask
	ClassCompacted     = wire.CodeCompacted
	ClassInvalid       = wire.CodeInvalid
	ClassTooLarge      = wire.CodeTooLarge
	ClassClosed        = wire.CodeClosed
	ClassTimeout       = wire.CodeTimeout
	ClassForbidden     = wire.CodeForbidden
	ClassInternal      = wire.CodeInternal
	// ClassPaused: the actor is paused; its writes are refused until it
	// is resumed (the HTTP API's problem code "paused").
	ClassPaused = wire.CodePaused
)

// ToolError is the structured content of a failed tool call: its class,
// the workspace's message, what to do next, and the details the class
// carries (the current version of a conflict, the holder of a lock, the
// field of bad input).
type ToolError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Conflicts: the version stored now.
	CurrentVersion int64 `json:"current_version,omitempty"`
	// Locks held by someone else, and stale fences.
	Resource  string     `json:"resource,omitempty"`
	Holder    string     `json:"holder,omitempty"`
	Token     int64      `json:"token,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Bad input.
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Compacted logs: the oldest seq kept.
	Floor int64 `json:"floor,omitempty"`
	// Refusals of the policy: the action and the rule consulted.
	Action string `json:"action,omitempty"`
	Rule   string `json:"rule,omitempty"`
}

// classify makes the tool error of err. Its class is the code the wire
// package's one table gives the error (so the HTTP API's); this adds the
// details an agent acts on and what to do next. A passed deadline is a
// timeout; any other error outside the table is internal, and its text is
// passed through redact before an agent sees it.
func classify(err error, redact func(error) error) ToolError {
	te := ToolError{Message: err.Error()}
	p, ok := wire.ProblemOf(err)
	if !ok {
		if p = wire.TimeoutOf(err, "the call's deadline passed"); p != nil {
			te.Error, te.Message = p.Code, p.Detail
			return te
		}
		te.Error, te.Message = ClassInternal, redact(err).Error()
		return te
	}
	te.Error = p.Code
	var (
		conflict *workspace.ConflictError
		locked   *workspace.LockedError
		stale    *workspace.StaleFenceError
		invalid  *workspace.InvalidError
		compact  *workspace.CompactedError
		denied   *workspace.ForbiddenError
	)
	switch te.Error {
	case ClassPaused:
		te.Hint = "ack the pause message (message ack=ID; inbox unacked=true lists it), then wait to be resumed"
	case ClassConflict:
		if errors.As(err, &conflict) {
			te.CurrentVersion = conflict.Current
		}
		te.Hint = "the record changed since you read it: re-read it"
		if te.CurrentVersion > 0 {
			te.Hint += fmt.Sprintf(" and retry with if_version %d", te.CurrentVersion)
		}
	case ClassAlreadyExists:
		te.Hint = "read it, then update it with if_version set to its version"
	case ClassLocked:
		if errors.As(err, &locked) {
			exp := locked.ExpiresAt.UTC()
			te.Resource, te.Holder, te.Token, te.ExpiresAt = locked.Resource, locked.Holder, locked.Token, &exp
			te.Hint = fmt.Sprintf("%s holds it until %s: wait for it (lock op=acquire with wait_seconds) or work on something else",
				locked.Holder, exp.Format(time.RFC3339))
		}
	case ClassStaleFence:
		if errors.As(err, &stale) {
			te.Resource, te.Token = stale.Resource, stale.Newest
		}
		te.Hint = "your lease was taken over: acquire the lock again and write with the new token as fence"
	case ClassLockLost:
		te.Hint = "the lease or claim lapsed and is no longer yours: acquire (or claim) again"
	case ClassNotHolder:
		te.Hint = "only the holder of the lease or claim may do this"
	case ClassNoTask:
		te.Hint = "nothing is ready: add a task, or claim with wait_seconds to wait for one"
	case ClassInvalid, ClassTooLarge:
		if errors.As(err, &invalid) {
			te.Field, te.Reason = invalid.Field, invalid.Reason
			if invalid.Field == "actor" {
				te.Hint = "this server has no actor: start it with --as NAME (or AGENTSPACE_ACTOR), or connect with a token"
			}
		}
	case ClassCompacted:
		if errors.As(err, &compact) {
			te.Floor = compact.Floor
			te.Hint = fmt.Sprintf("re-read the current state, then wait from after_seq %d", compact.Floor-1)
		}
	case ClassForbidden:
		if errors.As(err, &denied) {
			te.Action, te.Rule, te.Reason = denied.Action, denied.Rule, denied.Reason
			te.Hint = "the workspace's policy does not let you do this: do not retry; ask whoever holds the right, or leave it"
		}
	}
	return te
}

// errorResult is the tool result of a failed call: isError set, the text
// an agent reads, and the ToolError as structured content.
func errorResult(te ToolError) *sdk.CallToolResult {
	text := te.Error + ": " + te.Message
	if te.Hint != "" {
		text += " (" + te.Hint + ")"
	}
	return &sdk.CallToolResult{
		IsError:           true,
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: te,
	}
}

// okResult is the tool result of a successful call: v as structured
// content and, for clients that read only text, the same JSON as text.
func okResult(v any) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// badArg is the tool error for an argument the tool itself refuses (one
// the workspace never sees): the same shape as the workspace's.
func badArg(field, format string, args ...any) error {
	return &workspace.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
