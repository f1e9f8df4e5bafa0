//go:build !unix

package sqlite

import (
	"context"
	"sync"
)

// migrateMu stands in for flock where there is none: it serializes
// migrations within this process only.
var migrateMu sync.Mutex

func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	migrateMu.Lock()
	return migrateMu.Unlock, nil
}
