package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestWsctlAddsTheCommandALibraryErrorLeavesOut: library errors name no
// wsctl command; wsctl's line adds the one to run.
func TestWsctlAddsTheCommandALibraryErrorLeavesOut(t *testing.T) {
	for _, c := range []struct {
		err  error
		hint string
	}{
		{&gitwork.CheckoutError{Branch: "main", Path: "/repo", Reason: "would overwrite a.txt"}, "'wsctl merge run'"},
		{&workspace.SchemaError{Current: 3, Want: 5}, "'wsctl migrate up'"},
		{&workspace.SchemaError{Current: 4, Want: 5, Dirty: true}, "'wsctl migrate force 4'"},
	} {
		assert.NotContains(t, c.err.Error(), "wsctl", "%T", c.err)
		_, line := (&app{}).report(classify(fmt.Errorf("wrapped: %w", c.err)))
		assert.Contains(t, line, c.hint, "%T", c.err)
		assert.Contains(t, line, c.err.Error())
	}
}

// TestAServerWantingATokenHasItsOwnExitCode: a 401 from a server (no
// token, or one it does not know) exits 10 and names AGENTSPACE_TOKEN.
func TestAServerWantingATokenHasItsOwnExitCode(t *testing.T) {
	err := wire.DecodeError(401, []byte(`{"type":"urn:agentspace:problem:unauthorized","title":"Unauthorized","status":401,"detail":"unauthorized: the token is unknown, revoked or expired","code":"unauthorized"}`))
	code, line := (&app{}).report(classify(fmt.Errorf("open http://127.0.0.1:7465: %w", err)))
	assert.Equal(t, exitUnauthorized, code)
	assert.Contains(t, line, "the token is unknown, revoked or expired: set AGENTSPACE_TOKEN")
}

// TestEveryErrorExitsAsThePackageCommentSays: each error the package
// comment names exits with the code it gives, whether it comes from the
// store itself or back from a server (decoded from its problem): the
// exit code is the error table's, by the error's problem code.
func TestEveryErrorExitsAsThePackageCommentSays(t *testing.T) {
	for _, c := range []struct {
		err  error
		exit int
	}{
		{&workspace.InvalidError{Field: "name", Reason: "empty"}, 2},
		{&workspace.InvalidError{Field: "content", Reason: "over 8 bytes", TooLarge: true}, 2},
		{&workspace.ConflictError{Expected: 1, Current: 2}, 3},
		{workspace.ErrConflict, 3},
		{workspace.ErrAlreadyExists, 3},
		{&workspace.LockedError{Resource: "r", Holder: "ann", Token: 1}, 4},
		{&workspace.StaleFenceError{Resource: "r", Fence: 1, Newest: 2}, 4},
		{workspace.ErrNotHolder, 4},
		{workspace.ErrLockLost, 4},
		{workspace.ErrNotFound, 5},
		{&workspace.VersionRemovedError{Name: "a", Version: 1, Oldest: 2}, 5},
		{workspace.ErrNoTask, 6},
		{&workspace.ForbiddenError{Actor: "ann", Action: "artifact.write", Rule: "artifacts_write", Reason: "no"}, 7},
		{wire.ErrForbidden, 7},
		{&workspace.NoWorkspaceError{Where: "/x", Reason: "the file does not exist"}, 8},
		{wire.ErrUnauthorized, 10},
		{&workspace.PausedError{Actor: "w", By: "root"}, 11},
		{workspace.ErrUnavailable, 75},
		{&workspace.SchemaError{Current: 3, Want: 5}, 1},
		{&workspace.CompactedError{Requested: 1, Floor: 5}, 1},
		{workspace.ErrRewound, 1},
		{workspace.ErrClosed, 1},
		{errors.New("disk on fire"), 1},
	} {
		local, _ := (&app{}).report(classify(fmt.Errorf("op: %w", c.err)))
		assert.Equal(t, c.exit, local, "%v", c.err)
		if p, ok := wire.ProblemOf(c.err); ok {
			b, err := json.Marshal(p)
			require.NoError(t, err)
			remote, _ := (&app{}).report(classify(fmt.Errorf("op: %w", wire.DecodeError(p.Status, b))))
			assert.Equal(t, c.exit, remote, "%v, back from a server", c.err)
		}
	}
}
