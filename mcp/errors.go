package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/workspace"
)

// Error classes: the "error" field of a failed tool call's structured
// content. They are the codes of the HTTP API's problems, so an agent
// that knows one surface knows the other.
const (
	ClassNotFound      = "not_found"
	ClassAlreadyExists = "already_exists"
	ClassConflict      = "conflict"
	ClassLocked        = "locked"
	ClassNotHolder     = "not_holder"
	ClassLockLost      = "lock_lost"
	ClassStaleFence    = "stale_fence"
	ClassNoTask        = "no_task"
	ClassCompacted     = "compacted"
	ClassInvalid       = "invalid"
	ClassTooLarge      = "too_large"
	ClassClosed        = "closed"
	ClassTimeout       = "timeout"
	ClassForbidden     = "forbidden"
	ClassInternal      = "internal"
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

// classify is the one table from the workspace's errors to tool errors.
// An error outside the workspace's set is internal; its text is passed
// through redact before an agent sees it.
func classify(err error, redact func(error) error) ToolError {
	var (
		conflict *workspace.ConflictError
		locked   *workspace.LockedError
		stale    *workspace.StaleFenceError
		invalid  *workspace.InvalidError
		compact  *workspace.CompactedError
		denied   *workspace.ForbiddenError
	)
	te := ToolError{Message: err.Error()}
	switch {
	case errors.As(err, &conflict):
		te.Error, te.CurrentVersion = ClassConflict, conflict.Current
		te.Hint = "the record changed since you read it: re-read it"
		if conflict.Current > 0 {
			te.Hint += fmt.Sprintf(" and retry with if_version %d", conflict.Current)
		}
	case errors.Is(err, workspace.ErrAlreadyExists):
		te.Error, te.Hint = ClassAlreadyExists, "read it, then update it with if_version set to its version"
	case errors.As(err, &locked):
		exp := locked.ExpiresAt.UTC()
		te.Error, te.Resource, te.Holder, te.Token, te.ExpiresAt = ClassLocked, locked.Resource, locked.Holder, locked.Token, &exp
		te.Hint = fmt.Sprintf("%s holds it until %s: wait for it (lock op=acquire with wait_seconds) or work on something else",
			locked.Holder, exp.Format(time.RFC3339))
	case errors.As(err, &stale):
		te.Error, te.Resource, te.Token = ClassStaleFence, stale.Resource, stale.Newest
		te.Hint = "your lease was taken over: acquire the lock again and write with the new token as fence"
	case errors.Is(err, workspace.ErrStaleFence):
		te.Error, te.Hint = ClassStaleFence, "your lease was taken over: acquire the lock again and write with the new token as fence"
	case errors.Is(err, workspace.ErrLockLost):
		te.Error, te.Hint = ClassLockLost, "the lease or claim lapsed and is no longer yours: acquire (or claim) again"
	case errors.Is(err, workspace.ErrNotHolder):
		te.Error, te.Hint = ClassNotHolder, "only the holder of the lease or claim may do this"
	case errors.Is(err, workspace.ErrNotFound):
		te.Error = ClassNotFound
	case errors.Is(err, workspace.ErrNoTask):
		te.Error, te.Hint = ClassNoTask, "nothing is ready: add a task, or claim with wait_seconds to wait for one"
	case errors.As(err, &invalid):
		te.Error, te.Field, te.Reason = ClassInvalid, invalid.Field, invalid.Reason
		if invalid.TooLarge {
			te.Error = ClassTooLarge
		}
		if invalid.Field == "actor" {
			te.Hint = "this server has no actor: start it with --as NAME (or AGENTSPACE_ACTOR), or connect with a token"
		}
	case errors.As(err, &compact):
		te.Error, te.Floor = ClassCompacted, compact.Floor
		te.Hint = fmt.Sprintf("re-read the current state, then wait from after_seq %d", compact.Floor-1)
	case errors.As(err, &denied):
		te.Error, te.Action, te.Rule, te.Reason = ClassForbidden, denied.Action, denied.Rule, denied.Reason
		te.Hint = "the workspace's policy does not let you do this: do not retry; ask whoever holds the right, or leave it"
	case errors.Is(err, workspace.ErrForbidden):
		te.Error = ClassForbidden
	case errors.Is(err, workspace.ErrClosed):
		te.Error = ClassClosed
	case errors.Is(err, context.DeadlineExceeded):
		te.Error, te.Message = ClassTimeout, "the call's deadline passed"
	default:
		te.Error, te.Message = ClassInternal, redact(err).Error()
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
