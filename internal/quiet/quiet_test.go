package quiet

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRuleWaitsLongerAfterEachFailedCheck(t *testing.T) {
	var r Rule
	assert.False(t, r.Ready(), "no quiet commit yet")
	r.Commit(true)
	assert.True(t, r.Ready())
	r.Failed()
	assert.Equal(t, 2, r.Need())
	r.Commit(true)
	assert.False(t, r.Ready(), "one of two")
	r.Commit(false)
	r.Commit(true)
	assert.False(t, r.Ready(), "a commit after another store's starts the count again")
	r.Commit(true)
	assert.True(t, r.Ready())
	for range 10 {
		r.Failed()
	}
	assert.Equal(t, MaxNeed, r.Need())
	r.Held()
	assert.Equal(t, MaxNeed/2, r.Need())
	for range 10 {
		r.Held()
	}
	assert.Equal(t, 1, r.Need())
}
