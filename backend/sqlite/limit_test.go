package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoBareLimitParameter: no statement of the backend takes its LIMIT
// as a bare parameter, which SQLite recompiles on every run (see
// stmts.go).
func TestNoBareLimitParameter(t *testing.T) {
	bare := regexp.MustCompile(`(?i)\bLIMIT\s+\?`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			if bare.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: a bare LIMIT parameter (write LIMIT +?): %s", f, i+1, strings.TrimSpace(line))
			}
		}
		checked++
	}
	require.NotZero(t, checked)
}
