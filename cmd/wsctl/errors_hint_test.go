package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/gitwork"
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
