package workspace

import (
	"errors"
	"fmt"
	"time"
)

// The error set shared by every backend. Every error a Workspace returns that
// is about the store's state or the caller's input matches one of these with
// errors.Is; driver errors are wrapped so that their cause stays reachable.
var (
	// ErrNotFound: the record does not exist (or no longer does).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a live record with that name or key exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: an IfVersion condition failed. The error is a *ConflictError.
	ErrConflict = errors.New("version conflict")
	// ErrLocked: another owner holds a live lease on the resource. The error is a *LockedError.
	ErrLocked = errors.New("locked")
	// ErrNotHolder: the caller is not the owner (or token) of the lease or claim it named.
	ErrNotHolder = errors.New("not the lease holder")
	// ErrLockLost: the lease or claim expired and was taken over (or returned) before this call.
	ErrLockLost = errors.New("lease lost")
	// ErrStaleFence: the write's fencing token is older than the newest token issued for the record's lock.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrNoTask: no task is ready to claim.
	ErrNoTask = errors.New("no task ready")
	// ErrCompacted: the events asked for are below the log's floor. The error is a *CompactedError.
	ErrCompacted = errors.New("event log compacted")
	// ErrInvalid: bad input. The error is an *InvalidError naming the field.
	ErrInvalid = errors.New("invalid input")
	// ErrTooLarge: content over the configured size limit.
	ErrTooLarge = errors.New("too large")
	// ErrClosed: the handle (or subscription) was closed.
	ErrClosed = errors.New("workspace closed")
	// ErrSchema: the store's schema is older than this code (run `wsctl migrate up`)
	// or newer (refuse to touch it). The error is a *SchemaError.
	ErrSchema = errors.New("schema version mismatch")
	// ErrNoWorkspace: the DSN names no workspace (no database file, no
	// directory with a format file, no schema holding agentspace's tables)
	// and the caller asked to open only one that exists
	// (Options.MustExist). Nothing was created. The error is a
	// *NoWorkspaceError.
	ErrNoWorkspace = errors.New("no workspace")
	// ErrForbidden: the workspace's policy does not let the actor do this.
	// Nothing was written but a "denied" event. The error is a *ForbiddenError.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the store cannot be reached now (its database is
	// down, restarting, failing over or refusing connections). Try again
	// later: a read, or a write with an idempotency key, may be repeated
	// as is. A write that failed with it may have committed only when its
	// connection was lost after the commit was sent; the error then says
	// so (see *UnavailableError).
	ErrUnavailable = errors.New("store unavailable")
	// ErrRewound: the store's event log no longer holds events this
	// handle committed or delivered (its head went back, or another event
	// now has a seq it saw): the database failed over to a replica that
	// had not received them (asynchronous replication). Nothing was
	// written; re-read the state, and follow again from a seq the log has.
	ErrRewound = errors.New("event log rewound")
	// ErrPaused: the actor is paused by an operator (PauseActorOp); its
	// writes are refused, except acks and renewals, until it is resumed.
	// Ack the pause message and wait. The error is a *PausedError.
	ErrPaused = errors.New("actor paused")
)

// UnavailableError reports that the store could not be reached. It
// matches ErrUnavailable, and unwraps to the driver's error.
type UnavailableError struct {
	Backend string // e.g. "postgres"
	// Unknown is set when the connection was lost after a commit was
	// sent: the write may or may not have been applied.
	Unknown bool
	Cause   error
}

// Error says the store is unavailable, whether a write's outcome is
// unknown, and why.
func (e *UnavailableError) Error() string {
	what := "database unavailable"
	if e.Unknown {
		what = "database unavailable; the write may have committed"
	}
	return fmt.Sprintf("%s: %s: %v", e.Backend, what, e.Cause)
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the driver's error.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// ForbiddenError reports an operation the policy refused: who asked, what
// for, on what, and the rule that was consulted. It matches ErrForbidden.
type ForbiddenError struct {
	Actor  string   `json:"actor"`
	Roles  []string `json:"roles"`  // the roles checked
	Action string   `json:"action"` // a policy action, e.g. "artifact.write"
	Object string   `json:"object"` // an artifact name, note kind, lock resource, task id; "" for admin rights
	Rule   string   `json:"rule"`   // the policy key that would grant it, e.g. "artifacts_write"
	Reason string   `json:"reason"` // one line: why
}

// Error describes the refusal in one line.
func (e *ForbiddenError) Error() string {
	obj := ""
	if e.Object != "" {
		obj = fmt.Sprintf(" %q", e.Object)
	}
	return fmt.Sprintf("forbidden: %q may not %s%s: %s", e.Actor, e.Action, obj, e.Reason)
}

// Is reports whether target is ErrForbidden.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// NoWorkspaceError reports that there is no workspace where a DSN points.
// It matches ErrNoWorkspace.
type NoWorkspaceError struct {
	Where  string // the file, directory or schema looked at
	Reason string // what is missing there, e.g. "the file does not exist"
}

// Error says where no workspace was found and why.
func (e *NoWorkspaceError) Error() string {
	return fmt.Sprintf("no workspace at %s: %s", e.Where, e.Reason)
}

// Is reports whether target is ErrNoWorkspace.
func (e *NoWorkspaceError) Is(target error) bool { return target == ErrNoWorkspace }

// ConflictError reports a failed IfVersion condition. It matches ErrConflict.
type ConflictError struct {
	Subject  Subject `json:"subject"`  // the record written
	Expected int64   `json:"expected"` // the version the writer asked for
	Current  int64   `json:"current"`  // the version stored (0 if the record does not exist)
}

// Error describes the failure in one line.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s: version conflict: expected version %d, current is %d",
		e.Subject.Kind, e.Subject.label(), e.Expected, e.Current)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// LockedError reports that a live lease held by someone else blocked the call.
// It matches ErrLocked.
type LockedError struct {
	Resource  string    `json:"resource"`
	Holder    string    `json:"holder"`
	Token     int64     `json:"token"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Error describes the failure in one line.
func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is locked by %q (token %d) until %s",
		e.Resource, e.Holder, e.Token, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// StaleFenceError reports a write whose fencing token is older than the newest
// one issued for the record's lock. It matches ErrStaleFence.
type StaleFenceError struct {
	Resource string `json:"resource"`
	Fence    int64  `json:"fence"`  // the token the writer presented
	Newest   int64  `json:"newest"` // the newest token issued for Resource
}

// Error describes the failure in one line.
func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("%s: stale fencing token %d (newest is %d)", e.Resource, e.Fence, e.Newest)
}

// Is reports whether target is ErrStaleFence.
func (e *StaleFenceError) Is(target error) bool { return target == ErrStaleFence }

// CompactedError reports a read below the event log's floor. It matches ErrCompacted.
type CompactedError struct {
	Requested int64 `json:"requested"` // the AfterSeq asked for
	Floor     int64 `json:"floor"`     // the lowest seq still kept; resume from Floor-1 after re-reading state
}

// Error describes the failure in one line.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("events after seq %d were compacted: the log starts at seq %d", e.Requested, e.Floor)
}

// Is reports whether target is ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// VersionRemovedError reports a read of an artifact version that retention
// removed (GCPolicy.KeepVersions). It matches ErrNotFound.
type VersionRemovedError struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Oldest  int64  `json:"oldest"` // the artifact's oldest version still kept
}

// Error describes the failure in one line.
func (e *VersionRemovedError) Error() string {
	return fmt.Sprintf("artifact %q version %d was removed by retention: its oldest kept version is %d", e.Name, e.Version, e.Oldest)
}

// Is reports whether target is ErrNotFound.
func (e *VersionRemovedError) Is(target error) bool { return target == ErrNotFound }

// InvalidError reports bad input: which field, and why. It matches ErrInvalid,
// or ErrTooLarge when TooLarge is set.
type InvalidError struct {
	Field    string `json:"field"`
	Reason   string `json:"reason"`
	TooLarge bool   `json:"too_large"`
}

// Error describes the failure in one line.
func (e *InvalidError) Error() string {
	if e.TooLarge {
		return fmt.Sprintf("too large: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalid (or ErrTooLarge for size errors).
func (e *InvalidError) Is(target error) bool {
	if e.TooLarge {
		return target == ErrTooLarge
	}
	return target == ErrInvalid
}

// SchemaError reports a store whose schema version this code cannot use as is.
// It matches ErrSchema.
type SchemaError struct {
	Current int64 `json:"current"` // the store's version
	Want    int64 `json:"want"`    // the version this code needs
	Dirty   bool  `json:"dirty"`   // a migration failed half-way
}

// Error describes the failure in one line.
func (e *SchemaError) Error() string {
	switch {
	case e.Dirty:
		return fmt.Sprintf("schema is dirty at version %d (a migration failed half-way): check the store, then force its version to %d", e.Current, e.Current)
	case e.Current < e.Want:
		return fmt.Sprintf("schema is at version %d, this code needs %d: migrate the store up", e.Current, e.Want)
	default:
		return fmt.Sprintf("schema is at version %d, newer than this code's %d: upgrade agentspace; refusing to touch the store", e.Current, e.Want)
	}
}

// Is reports whether target is ErrSchema.
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
