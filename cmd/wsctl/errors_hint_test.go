package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

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
