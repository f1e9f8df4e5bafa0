package conformance

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// The model must reject the histories our guarantees rule out, or the
// linearizability case would pass whatever a backend did.
func TestLinearizabilityModelRejectsViolationsAndAcceptsOverlaps(t *testing.T) {
	op := func(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	a, l := linArtifacts[0], linLocks[0]
	write := linInput{Key: a, Op: "write", IfVersion: 1, Content: "x"}
	read := linInput{Key: a, Op: "read"}
	cases := []struct {
		name    string
		history []porcupine.Operation
		legal   bool
	}{
		{"a read after an acknowledged write sees it", []porcupine.Operation{
			op(0, 0, 10, write, linOutput{Version: 2}),
			op(1, 20, 30, read, linOutput{Version: 2, Content: "x"}),
		}, true},
		{"a stale read after an acknowledged write", []porcupine.Operation{
			op(0, 0, 10, write, linOutput{Version: 2}),
			op(1, 20, 30, read, linOutput{Version: 1, Content: linArtifactStart}),
		}, false},
		{"a read overlapping a write may see either", []porcupine.Operation{
			op(0, 0, 30, write, linOutput{Version: 2}),
			op(1, 10, 20, read, linOutput{Version: 1, Content: linArtifactStart}),
		}, true},
		{"two winners of one IfVersion", []porcupine.Operation{
			op(0, 0, 10, write, linOutput{Version: 2}),
			op(1, 0, 10, linInput{Key: a, Op: "write", IfVersion: 1, Content: "y"}, linOutput{Version: 2}),
		}, false},
		{"a conflict that names the wrong current version", []porcupine.Operation{
			op(0, 0, 10, write, linOutput{Version: 2}),
			op(1, 20, 30, write, linOutput{Err: "conflict", Version: 1}),
		}, false},
		{"two holders of one lock", []porcupine.Operation{
			op(0, 0, 10, linInput{Key: l, Op: "acquire", Actor: "c0"}, linOutput{Token: 1}),
			op(1, 0, 10, linInput{Key: l, Op: "acquire", Actor: "c1"}, linOutput{Token: 2}),
		}, false},
		{"a hand-over that reuses a token", []porcupine.Operation{
			op(0, 0, 10, linInput{Key: l, Op: "acquire", Actor: "c0"}, linOutput{Token: 1}),
			op(0, 20, 30, linInput{Key: l, Op: "release", Actor: "c0", Token: 1}, linOutput{}),
			op(1, 40, 50, linInput{Key: l, Op: "acquire", Actor: "c1"}, linOutput{Token: 1}),
		}, false},
		{"a claim that skips the best ready task", []porcupine.Operation{
			op(0, 0, 10, linInput{Key: linKeyTasks, Op: "claim", Actor: "c0"}, linOutput{TaskID: "t2"}),
		}, false},
		{"one task claimed twice", []porcupine.Operation{
			op(0, 0, 10, linInput{Key: linKeyTasks, Op: "claim", Actor: "c0"}, linOutput{TaskID: "t1"}),
			op(1, 0, 10, linInput{Key: linKeyTasks, Op: "claim", Actor: "c1"}, linOutput{TaskID: "t1"}),
		}, false},
		{"a released task is claimed again first", []porcupine.Operation{
			op(0, 0, 10, linInput{Key: linKeyTasks, Op: "claim", Actor: "c0"}, linOutput{TaskID: "t1"}),
			op(0, 20, 30, linInput{Key: linKeyTasks, Op: "unclaim", Actor: "c0", TaskID: "t1"}, linOutput{}),
			op(1, 40, 50, linInput{Key: linKeyTasks, Op: "claim", Actor: "c1"}, linOutput{TaskID: "t1"}),
		}, true},
	}
	model := linModel([]string{"t1", "t2"}, map[string]int{"t1": 0, "t2": 1})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.legal, porcupine.CheckOperations(model, c.history))
		})
	}
}
