package workspace_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/workspace"
)

func TestNoWorkspaceErrorMatchesItsSentinel(t *testing.T) {
	err := error(&workspace.NoWorkspaceError{Where: "/x/ws.db", Reason: "the file does not exist"})
	assert.ErrorIs(t, err, workspace.ErrNoWorkspace)
	assert.Equal(t, "no workspace at /x/ws.db: the file does not exist", err.Error())
}
