package jsonstore

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/workspace"
)

// TestTaskIndexesFollowEveryChangeAndItsUndo: the claim-order index of
// pending tasks and the id index of claimed ones stay exact through puts,
// status changes, priority changes and their undos (a rolled-back job).
func TestTaskIndexesFollowEveryChangeAndItsUndo(t *testing.T) {
	st := newState()
	task := func(id string, prio int, status workspace.TaskStatus) workspace.Task {
		return workspace.Task{ID: id, Priority: prio, Status: status}
	}
	st.setTask(task("b", 0, workspace.TaskPending))
	st.setTask(task("a", 0, workspace.TaskPending))
	undoPrio := st.setTask(task("c", 5, workspace.TaskPending))
	assert.Equal(t, []readyKey{{5, "c"}, {0, "a"}, {0, "b"}}, st.ready, "highest priority, then oldest id")

	undoClaim := st.setTask(task("a", 0, workspace.TaskInProgress))
	assert.Equal(t, []readyKey{{5, "c"}, {0, "b"}}, st.ready)
	assert.Equal(t, []string{"a"}, st.claimed)

	undoClaim()
	assert.Equal(t, []readyKey{{5, "c"}, {0, "a"}, {0, "b"}}, st.ready, "the undo puts it back")
	assert.Empty(t, st.claimed)

	undoPrio()
	assert.Equal(t, []readyKey{{0, "a"}, {0, "b"}}, st.ready, "undoing a new task forgets it")
	_, ok := st.tasks["c"]
	assert.False(t, ok)

	st.setTask(task("b", 0, workspace.TaskDone))
	assert.Equal(t, []readyKey{{0, "a"}}, st.ready, "a done task is no candidate")

	rebuilt := newState()
	for _, tk := range st.tasks {
		rebuilt.tasks[tk.ID] = tk
	}
	rebuilt.indexTasks()
	assert.Equal(t, st.ready, rebuilt.ready, "a load builds the same index")
	assert.Equal(t, len(st.claimed), len(rebuilt.claimed))
}
