package testskip

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

const env = "AGENTSPACE_TEST_REQUIRE_TESTSKIP_SELF"

// TestRequiredIsOneOnly: the one truth test is the value "1", the one
// .ci/run sets; unset, empty or any other value leaves a skip a skip.
func TestRequiredIsOneOnly(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "": false, "0": false, "true": false, "yes": false} {
		t.Setenv(env, v)
		assert.Equal(t, want, Required(env), "%s=%q", env, v)
	}
}

// recorder is a testing.TB that records how Skip ended it.
type recorder struct {
	testing.TB
	ended, msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended, r.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.ended, r.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}

func skipped(f func(tb testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
		r.ended = "returned"
	}()
	<-done
	return r
}

// TestSkipFailsWhereRequired: Skip skips with its message, and fails with
// the same message and the variable's name where the variable requires.
func TestSkipFailsWhereRequired(t *testing.T) {
	t.Setenv(env, "")
	r := skipped(func(tb testing.TB) { Skip(tb, env, "no %s here", "chromium") })
	assert.Equal(t, "skip", r.ended)
	assert.Equal(t, "no chromium here", r.msg)

	t.Setenv(env, "1")
	r = skipped(func(tb testing.TB) { Skip(tb, env, "no %s here", "chromium") })
	assert.Equal(t, "fatal", r.ended)
	assert.Contains(t, r.msg, "no chromium here")
	assert.Contains(t, r.msg, env+"=1")
}
