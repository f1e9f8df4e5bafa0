//go:build !unix

package gitwork

import (
	"context"
	"os"
)

// lockFile takes no lock where flock is missing: the retries on a
// transient failure are all that guard a concurrent prune there.
func lockFile(context.Context, *os.File) error { return nil }
