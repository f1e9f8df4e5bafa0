package gcpace

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// percent reads the pace without changing it.
func percent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestServeSetsThePaceUntilTheLastRestore(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Setenv("GOGC", "") // t.Setenv restores it after the test
		require.NoError(t, os.Unsetenv("GOGC"))
	}
	before := percent()
	undoA := Serve()
	require.Equal(t, ServePercent, percent())
	undoB := Serve()
	undoA()
	undoA() // a second call is a no-op, not one more undo
	require.Equal(t, ServePercent, percent(), "another caller still serves")
	undoB()
	require.Equal(t, before, percent())
}

func TestServeLeavesAPaceTheEnvironmentSets(t *testing.T) {
	t.Setenv("GOGC", "150")
	before := percent()
	undo := Serve()
	require.Equal(t, before, percent())
	undo()
	require.Equal(t, before, percent())
}
