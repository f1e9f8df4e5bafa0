package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestEveryErrorSurvivesTheWire encodes each error of the workspace's set
// as the server does (ProblemOf) and decodes it as a client would: errors.Is and
// errors.As hold after the trip, with every typed field intact.
func TestEveryErrorSurvivesTheWire(t *testing.T) {
	exp := time.Date(2026, 5, 1, 10, 0, 0, 123000000, time.UTC)
	cases := []struct {
		err    error
		is     error
		status int
	}{
		{&workspace.ConflictError{Subject: workspace.Subject{Kind: "artifact", ID: "a1", Name: "x"}, Expected: 2, Current: 3}, workspace.ErrConflict, 409},
		{&workspace.LockedError{Resource: "r", Holder: "ann", Token: 7, ExpiresAt: exp}, workspace.ErrLocked, 423},
		{&workspace.StaleFenceError{Resource: "r", Fence: 3, Newest: 5}, workspace.ErrStaleFence, 409},
		{&workspace.CompactedError{Requested: 4, Floor: 10}, workspace.ErrCompacted, 410},
		{&workspace.InvalidError{Field: "name", Reason: "has a \"..\" segment"}, workspace.ErrInvalid, 400},
		{&workspace.InvalidError{Field: "content", Reason: "over 10 bytes", TooLarge: true}, workspace.ErrTooLarge, 413},
		{&workspace.SchemaError{Current: 3, Want: 5, Dirty: true}, workspace.ErrSchema, 503},
		{&workspace.NoWorkspaceError{Where: "/x", Reason: "the file does not exist"}, workspace.ErrNoWorkspace, 503},
		{&workspace.ForbiddenError{Actor: "ann", Roles: []string{"planner"}, Action: "artifact.write", Object: "src/a.go", Rule: "artifacts_write", Reason: "no artifacts_write entry of roles planner grants it"}, workspace.ErrForbidden, 403},
		{fmt.Errorf("artifacts.get %q: %w", "x", workspace.ErrNotFound), workspace.ErrNotFound, 404},
		{&workspace.VersionRemovedError{Name: "plans/a.md", Version: 2, Oldest: 5}, workspace.ErrNotFound, 404},
		{fmt.Errorf("artifacts.create: %w", workspace.ErrAlreadyExists), workspace.ErrAlreadyExists, 409},
		{workspace.ErrNotHolder, workspace.ErrNotHolder, 409},
		{workspace.ErrLockLost, workspace.ErrLockLost, 409},
		{workspace.ErrNoTask, workspace.ErrNoTask, 404},
		{workspace.ErrClosed, workspace.ErrClosed, 503},
		{fmt.Errorf("%w: the token is unknown, revoked or expired", wire.ErrUnauthorized), wire.ErrUnauthorized, 401},
		{fmt.Errorf("%w: no", wire.ErrForbidden), wire.ErrForbidden, 403},
		{wire.ErrUnavailable, wire.ErrUnavailable, 503},
		{fmt.Errorf("events.subscribe: %w", workspace.ErrRewound), workspace.ErrRewound, 410},
		{&workspace.PausedError{Actor: "w", By: "root", Since: exp}, workspace.ErrPaused, 423},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			for _, batched := range []bool{false, true} {
				in := c.err
				if batched {
					in = &workspace.BatchError{Index: 2, Err: c.err}
				}
				p, ok := wire.ProblemOf(in)
				require.True(t, ok)
				assert.Equal(t, c.status, p.Status)
				body, err := json.Marshal(p)
				require.NoError(t, err)
				out := wire.DecodeError(p.Status, body)
				require.ErrorIs(t, out, c.is)
				if batched {
					var be *workspace.BatchError
					require.ErrorAs(t, out, &be)
					assert.Equal(t, 2, be.Index)
					out = be.Err
				}
				// Typed errors come back equal, field for field.
				var typed interface{ Is(error) bool }
				if errors.As(c.err, &typed) {
					assert.Equal(t, c.err, out)
				}
				assert.Equal(t, c.err.Error(), out.Error())
			}
		})
	}
}

func TestDecodeErrorOfAnythingElseIsAStatusError(t *testing.T) {
	err := wire.DecodeError(502, []byte("<html>bad gateway</html>"))
	var se *wire.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 502, se.Status)
	assert.NotErrorIs(t, err, workspace.ErrNotFound)
}

// TestAnUnreachableStoreIsUnavailableWithRetryAfter: a store the server
// cannot reach answers 503 unavailable with Retry-After, naming the
// operation and not the host; a client's error matches ErrUnavailable.
func TestAnUnreachableStoreIsUnavailableWithRetryAfter(t *testing.T) {
	err := fmt.Errorf("tasks.claim: %w", &workspace.UnavailableError{Backend: "postgres",
		Cause: errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")})
	p, ok := wire.ProblemOf(err)
	require.True(t, ok)
	assert.Equal(t, 503, p.Status)
	assert.Equal(t, wire.CodeUnavailable, p.Code)
	assert.Equal(t, "tasks.claim: postgres: database unavailable", p.Detail)
	assert.Equal(t, []string{"1"}, p.GetHeaders()["Retry-After"])
	body, err := json.Marshal(p)
	require.NoError(t, err)
	out := wire.DecodeError(p.Status, body)
	assert.ErrorIs(t, out, workspace.ErrUnavailable)
	assert.ErrorIs(t, out, wire.ErrUnavailable)
}
