package engine

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/agentspace/agentspace/internal/printable"

	"github.com/agentspace/agentspace/workspace"
	"github.com/google/uuid"
)

// Validation happens here, once, before any store sees the input. Bad
// input is a *workspace.InvalidError naming the field.

var kindRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })

// Page sizes of the List and Read calls: a zero Limit gets the default, a
// larger one than the maximum is cut to it.
const (
	maxPageLimit     = 1000
	defaultPageLimit = 100
)

func invalid(field, format string, args ...any) error {
	return &workspace.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func tooLarge(field, format string, args ...any) error {
	return &workspace.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...), TooLarge: true}
}

// checkName is workspace.ValidateName for the input field.
func checkName(field, name string) error {
	err := workspace.ValidateName(name)
	var ie *workspace.InvalidError
	if errors.As(err, &ie) {
		return invalid(field, "%s", ie.Reason)
	}
	return err
}

// checkPrintable rejects invalid UTF-8, NUL and control characters (newlines
// and tabs too unless multiline).
func checkPrintable(field, s string, multiline bool) error {
	if p := printable.Problem(s, multiline); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}

func checkActor(actor string) error {
	if actor == "" {
		return invalid("actor", "must not be empty: every write says who made it")
	}
	if len(actor) > workspace.MaxActorLen {
		return invalid("actor", "longer than %d bytes", workspace.MaxActorLen)
	}
	return checkPrintable("actor", actor, false)
}

func checkKind(field, kind string) error {
	if len(kind) > workspace.MaxKindLen {
		return invalid(field, "longer than %d bytes", workspace.MaxKindLen)
	}
	if !kindRE().MatchString(kind) {
		return invalid(field, "%q must be a lower-case word (a-z, 0-9, _ or -, starting with a letter)", kind)
	}
	return nil
}

func checkKey(field, key string, max int) error {
	if key == "" {
		return invalid(field, "must not be empty")
	}
	if len(key) > max {
		return invalid(field, "longer than %d bytes", max)
	}
	return checkPrintable(field, key, false)
}

// checkLine checks an optional one-line filter (a name prefix, a subject
// name) as names are checked: what no name can hold matches nothing, so
// it is refused rather than silently matching nothing.
func checkLine(field, s string, max int) error {
	if len(s) > max {
		return invalid(field, "longer than %d bytes", max)
	}
	return checkPrintable(field, s, false)
}

func checkText(field, s string, max int) error {
	if len(s) > max {
		return invalid(field, "longer than %d bytes", max)
	}
	return checkPrintable(field, s, true)
}

func checkID(field, id string) error {
	if id == "" {
		return invalid(field, "must not be empty")
	}
	if len(id) != 36 {
		return invalid(field, "%q is not a UUID", truncate(id, 64))
	}
	if _, err := uuid.Parse(id); err != nil {
		return invalid(field, "%q is not a UUID", id)
	}
	return nil
}

func checkOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return checkID(field, id)
}

func checkLabels(field string, labels map[string]string) error {
	if len(labels) > workspace.MaxLabels {
		return invalid(field, "more than %d labels", workspace.MaxLabels)
	}
	for k, v := range labels {
		if err := checkKey(field+" key", k, workspace.MaxLabelLen); err != nil {
			return err
		}
		if len(v) > workspace.MaxLabelLen {
			return invalid(field, "value of %q longer than %d bytes", k, workspace.MaxLabelLen)
		}
		if err := checkPrintable(field+" value", v, false); err != nil {
			return err
		}
	}
	return nil
}

func checkVersion(field string, v int64) error {
	if v < 0 {
		return invalid(field, "%d is negative", v)
	}
	return nil
}

func checkTTL(field string, d time.Duration) error {
	if d < workspace.MinTTL || d > workspace.MaxTTL {
		return invalid(field, "%s is out of range [%s, %s]", d, workspace.MinTTL, workspace.MaxTTL)
	}
	return nil
}

func checkContentType(ct string) error {
	if len(ct) > 255 {
		return invalid("content type", "longer than 255 bytes")
	}
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return invalid("content type", "%q must be printable ASCII", ct)
		}
	}
	return nil
}

func checkCond(c workspace.Cond) error {
	if err := checkVersion("if-version", c.IfVersion); err != nil {
		return err
	}
	if err := checkVersion("fence", c.Fence); err != nil {
		return err
	}
	return checkText("message", c.Message, workspace.MaxTextLen)
}

func checkRef(ref workspace.ArtifactRef) error {
	switch {
	case ref.ID != "" && ref.Name != "":
		return invalid("artifact ref", "give an ID or a name, not both")
	case ref.ID != "":
		if err := checkID("artifact id", ref.ID); err != nil {
			return err
		}
	default:
		if err := checkName("name", ref.Name); err != nil {
			return err
		}
	}
	return checkVersion("version", ref.Version)
}

func checkIdemKey(k string) error {
	if k == "" {
		return nil
	}
	if len(k) > 256 {
		return invalid("idempotency key", "longer than 256 bytes")
	}
	return checkPrintable("idempotency key", k, false)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (h *handle) checkContent(content []byte) error {
	if int64(len(content)) > h.opts.MaxArtifactSize {
		return tooLarge("content", "%d bytes is over the limit of %d (the store's ws_max_artifact_size)", len(content), h.opts.MaxArtifactSize)
	}
	return nil
}

// checkOp validates one batch op by its entry in the op table. Ops are
// values: a pointer to an op, or a type the table does not know, is
// ErrInvalid.
func (h *handle) checkOp(op workspace.Op) error {
	if op == nil {
		return invalid("op", "is nil")
	}
	s, err := specOf(op)
	if err != nil {
		return err
	}
	return s.check(h, op)
}

func checkCreateArtifact(h *handle, o workspace.CreateArtifactOp) error {
	if err := checkName("name", o.Artifact.Name); err != nil {
		return err
	}
	if o.Artifact.Kind != "" {
		if err := checkKind("kind", o.Artifact.Kind); err != nil {
			return err
		}
	}
	if err := checkContentType(o.Artifact.ContentType); err != nil {
		return err
	}
	if err := checkLabels("labels", o.Artifact.Labels); err != nil {
		return err
	}
	if err := checkOptionalID("task id", o.Artifact.TaskID); err != nil {
		return err
	}
	if err := checkVersion("fence", o.Fence); err != nil {
		return err
	}
	if err := checkText("message", o.Message, workspace.MaxTextLen); err != nil {
		return err
	}
	return h.checkContent(o.Artifact.Content)
}

func checkUpdateArtifact(h *handle, o workspace.UpdateArtifactOp) error {
	if err := checkRef(o.Ref); err != nil {
		return err
	}
	if o.Ref.Version != 0 {
		return invalid("version", "an update always writes a new head: use IfVersion for a condition")
	}
	if err := checkCond(o.Cond); err != nil {
		return err
	}
	c := o.Change
	if c.Kind != nil {
		if err := checkKind("kind", *c.Kind); err != nil {
			return err
		}
	}
	if c.ContentType != nil {
		if err := checkContentType(*c.ContentType); err != nil {
			return err
		}
	}
	if c.Owner != nil {
		if err := checkKey("owner", *c.Owner, workspace.MaxActorLen); err != nil {
			return err
		}
	}
	if c.TaskID != nil {
		if err := checkOptionalID("task id", *c.TaskID); err != nil {
			return err
		}
	}
	if err := checkLabels("labels", c.Labels); err != nil {
		return err
	}
	return h.checkContent(c.Content)
}

func checkDeleteArtifact(_ *handle, o workspace.DeleteArtifactOp) error {
	if err := checkRef(o.Ref); err != nil {
		return err
	}
	return checkCond(o.Cond)
}

func checkRollbackArtifact(_ *handle, o workspace.RollbackArtifactOp) error {
	if err := checkRef(o.Ref); err != nil {
		return err
	}
	if o.To < 1 {
		return invalid("to", "rollback target version %d must be at least 1", o.To)
	}
	return checkCond(o.Cond)
}

func checkCreateTask(_ *handle, o workspace.CreateTaskOp) error {
	if err := checkKey("title", o.Task.Title, workspace.MaxTitleLen); err != nil {
		return err
	}
	if err := checkText("description", o.Task.Description, workspace.MaxTextLen); err != nil {
		return err
	}
	if err := checkOptionalID("parent id", o.Task.ParentID); err != nil {
		return err
	}
	if len(o.Task.DependsOn) > workspace.MaxDependsOn {
		return invalid("depends on", "more than %d dependencies", workspace.MaxDependsOn)
	}
	for _, d := range o.Task.DependsOn {
		if err := checkID("depends on", d); err != nil {
			return err
		}
	}
	if len(o.Task.Areas) > workspace.MaxAreas {
		return invalid("areas", "more than %d areas", workspace.MaxAreas)
	}
	for _, a := range o.Task.Areas {
		if err := checkArea(a); err != nil {
			return err
		}
	}
	if o.Task.Assignee != "" {
		if err := checkKey("assignee", o.Task.Assignee, workspace.MaxActorLen); err != nil {
			return err
		}
	}
	if err := checkPriority(o.Task.Priority); err != nil {
		return err
	}
	if err := checkLabels("labels", o.Task.Labels); err != nil {
		return err
	}
	return checkText("message", o.Message, workspace.MaxTextLen)
}

func checkUpdateTask(_ *handle, o workspace.UpdateTaskOp) error {
	if err := checkID("task id", o.ID); err != nil {
		return err
	}
	if err := checkCond(o.Cond); err != nil {
		return err
	}
	c := o.Change
	if c.Status != nil && !c.Status.Valid() {
		return invalid("status", "%q is not one of pending, in_progress, blocked, done, failed, cancelled", *c.Status)
	}
	if c.Title != nil {
		if err := checkKey("title", *c.Title, workspace.MaxTitleLen); err != nil {
			return err
		}
	}
	if c.Description != nil {
		if err := checkText("description", *c.Description, workspace.MaxTextLen); err != nil {
			return err
		}
	}
	if c.Assignee != nil && *c.Assignee != "" {
		if err := checkKey("assignee", *c.Assignee, workspace.MaxActorLen); err != nil {
			return err
		}
	}
	if c.Priority != nil {
		if err := checkPriority(*c.Priority); err != nil {
			return err
		}
	}
	if c.Result != nil {
		if err := checkText("result summary", c.Result.Summary, workspace.MaxTextLen); err != nil {
			return err
		}
		for _, n := range c.Result.Artifacts {
			if err := checkName("result artifact", n); err != nil {
				return err
			}
		}
	}
	return checkLabels("labels", c.Labels)
}

func checkPutNote(_ *handle, o workspace.PutNoteOp) error {
	if err := checkKind("note kind", o.Note.Kind); err != nil {
		return err
	}
	if err := checkKey("note key", o.Note.Key, workspace.MaxKeyLen); err != nil {
		return err
	}
	if err := checkText("note title", o.Note.Title, workspace.MaxTitleLen); err != nil {
		return err
	}
	if err := checkText("note body", o.Note.Body, workspace.MaxTextLen); err != nil {
		return err
	}
	return checkCond(o.Cond)
}

func checkDeleteNote(_ *handle, o workspace.DeleteNoteOp) error {
	if err := checkKind("note kind", o.Kind); err != nil {
		return err
	}
	if err := checkKey("note key", o.Key, workspace.MaxKeyLen); err != nil {
		return err
	}
	return checkCond(o.Cond)
}

func checkReleaseLock(_ *handle, o workspace.ReleaseLockOp) error {
	if err := checkKey("resource", o.Resource, workspace.MaxNameLen); err != nil {
		return err
	}
	if o.Token < 1 {
		return invalid("token", "%d: a lease token is at least 1", o.Token)
	}
	return checkText("message", o.Message, workspace.MaxTextLen)
}

func checkPriority(p int) error {
	if p < -1_000_000 || p > 1_000_000 {
		return invalid("priority", "%d is out of range [-1000000, 1000000]", p)
	}
	return nil
}

func checkLimit(field string, n, max int) (int, error) {
	switch {
	case n < 0:
		return 0, invalid(field, "%d is negative", n)
	case n == 0:
		return defaultPageLimit, nil
	case n > max:
		return max, nil
	}
	return n, nil
}
