package workspace

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateName(t *testing.T) {
	good := []string{"plans/auth-api.md", "a", "src/api.go", "notes/ü/ñ.md", "a.b/c..d", strings.Repeat("x", MaxNameLen)}
	for _, n := range good {
		assert.NoError(t, ValidateName(n), n)
	}
	bad := []string{"", "/etc/passwd", "../x", "a/../b", "a/./b", ".", "..", "a//b", "a/", `a\b`, "a\x00b",
		"a\nb", "a\x7fb", "\xff\xfe", "C:/x", " a", "a /b", strings.Repeat("x", MaxNameLen+1),
		"src/\u202egnp.exe", "a\u200bb", "\ufeffa", "a\u2066b"} // format characters (Cf): bidi overrides, zero widths
	for _, n := range bad[len(bad)-4:] {
		assert.ErrorContains(t, ValidateName(n), "control character", "%q: the same refusal as a control character", n)
	}
	for _, n := range bad {
		assert.ErrorIs(t, ValidateName(n), ErrInvalid, "%q", n)
	}
}

func TestTaskStateMachine(t *testing.T) {
	allowed := map[[2]TaskStatus]bool{
		{TaskPending, TaskInProgress}: true, {TaskPending, TaskBlocked}: true, {TaskPending, TaskCancelled}: true,
		{TaskInProgress, TaskDone}: true, {TaskInProgress, TaskFailed}: true, {TaskInProgress, TaskPending}: true,
		{TaskInProgress, TaskBlocked}: true, {TaskInProgress, TaskCancelled}: true,
		{TaskBlocked, TaskPending}: true, {TaskBlocked, TaskCancelled}: true,
		{TaskFailed, TaskPending}: true, {TaskFailed, TaskCancelled}: true,
	}
	all := []TaskStatus{TaskPending, TaskInProgress, TaskBlocked, TaskDone, TaskFailed, TaskCancelled}
	for _, from := range all {
		assert.True(t, from.Valid())
		for _, to := range all {
			assert.Equal(t, allowed[[2]TaskStatus{from, to}], from.CanBecome(to), "%s -> %s", from, to)
		}
	}
	assert.False(t, TaskStatus("Done").Valid())
}

func TestErrorsMatchTheirSentinels(t *testing.T) {
	assert.ErrorIs(t, &ConflictError{}, ErrConflict)
	assert.ErrorIs(t, &LockedError{}, ErrLocked)
	assert.ErrorIs(t, &StaleFenceError{}, ErrStaleFence)
	assert.ErrorIs(t, &CompactedError{}, ErrCompacted)
	assert.ErrorIs(t, &SchemaError{}, ErrSchema)
	assert.ErrorIs(t, invalid("f", "r"), ErrInvalid)
	assert.ErrorIs(t, &InvalidError{Field: "f", Reason: "r", TooLarge: true}, ErrTooLarge)
	assert.NotErrorIs(t, &InvalidError{Field: "f", Reason: "r", TooLarge: true}, ErrInvalid)
	be := &BatchError{Index: 2, Op: PutNoteOp{}, Err: &ConflictError{Current: 3}}
	assert.ErrorIs(t, be, ErrConflict)
	assert.Contains(t, be.Error(), "batch op 2 (put note)")
	assert.Contains(t, (&SchemaError{Current: 1, Want: 2}).Error(), "migrate the store up")
	assert.Contains(t, (&SchemaError{Current: 3, Want: 2}).Error(), "refusing")
	assert.Contains(t, (&SchemaError{Current: 2, Want: 2, Dirty: true}).Error(), "force its version to 2")
}
