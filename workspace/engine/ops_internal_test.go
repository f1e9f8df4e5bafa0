package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/optypes"
	"github.com/agentspace/agentspace/workspace"
)

// TestOpTableCoversEveryOp: every op type of package workspace (a type with
// the Op interface's opName method, read from the package's source) has an
// entry in the op table, and the table has no other.
func TestOpTableCoversEveryOp(t *testing.T) {
	declared, err := optypes.Declared("..")
	require.NoError(t, err)
	require.NotEmpty(t, declared)
	var inTable []string
	for typ := range opTable {
		inTable = append(inTable, typ.Name())
	}
	assert.ElementsMatch(t, declared, inTable, "every op type has one entry in the op table")
}

// TestPointerOpsAreRefused: ops are values; a pointer to one is named in
// the refusal with the value to pass instead.
func TestPointerOpsAreRefused(t *testing.T) {
	_, err := specOf(&workspace.PutNoteOp{})
	assert.ErrorIs(t, err, workspace.ErrInvalid)
	assert.ErrorContains(t, err, "pass ops by value")
	s, err := specOf(workspace.PutNoteOp{Note: workspace.NotePut{Kind: "k"}})
	require.NoError(t, err)
	assert.Equal(t, "k", s.reserved(workspace.PutNoteOp{Note: workspace.NotePut{Kind: "k"}}))
}
