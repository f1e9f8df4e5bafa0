package shadow

import (
	"fmt"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// ErrUnsafePath is a path this package will not read or write: a link
// where a file or directory must be, a link out of the tree, a special
// file. It matches workspace.ErrInvalid too.
var ErrUnsafePath = fmt.Errorf("unsafe path (%w)", workspace.ErrInvalid)

// ErrNotValidated is a promotion without a passing validation of exactly
// the diff it would promote. It matches workspace.ErrInvalid too.
var ErrNotValidated = fmt.Errorf("no passing validation of this diff (%w)", workspace.ErrInvalid)

// ConflictError is a promotion refused because files it changes changed in
// the real tree (or artifacts it changes moved) since the shadow's base.
// It matches workspace.ErrConflict.
type ConflictError struct {
	Shadow string   `json:"shadow"`
	Paths  []string `json:"paths"` // files (or artifact names) that moved
}

// Error lists what moved.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("shadow %s: conflict: changed since the base: %s", e.Shadow, strings.Join(e.Paths, ", "))
}

// Is reports whether target is workspace.ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == workspace.ErrConflict }
