package workspace

import (
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Validation happens here, once, before any backend sees the input.

var kindRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ValidateName reports whether name is a usable artifact name: a relative,
// slash-separated path of printable UTF-8 with no empty, "." or ".."
// segments and no backslashes.
func ValidateName(name string) error { return checkName("name", name) }

func checkName(field, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if len(name) > MaxNameLen {
		return invalid(field, "longer than %d bytes", MaxNameLen)
	}
	if err := checkPrintable(field, name, false); err != nil {
		return err
	}
	if strings.ContainsRune(name, '\\') {
		return invalid(field, "%q contains a backslash: use / between segments", name)
	}
	if strings.HasPrefix(name, "/") {
		return invalid(field, "%q is absolute: names are relative paths", name)
	}
	if len(name) >= 2 && name[1] == ':' {
		return invalid(field, "%q looks like a drive path", name)
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return invalid(field, "%q has an empty segment", name)
		case ".", "..":
			return invalid(field, "%q has a %q segment", name, seg)
		}
		if strings.TrimSpace(seg) != seg {
			return invalid(field, "%q has a segment with leading or trailing space", name)
		}
	}
	return nil
}

// checkPrintable rejects invalid UTF-8, NUL and control characters (newlines
// and tabs too unless multiline).
func checkPrintable(field, s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return invalid(field, "is not valid UTF-8")
	}
	for _, r := range s {
		if r == 0 {
			return invalid(field, "contains a NUL character")
		}
		if multiline && (r == '\n' || r == '\t' || r == '\r') {
			continue
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			return invalid(field, "contains control character %U", r)
		}
	}
	return nil
}

func checkActor(actor string) error {
	if actor == "" {
		return invalid("actor", "must not be empty: every write says who made it")
	}
	if len(actor) > MaxActorLen {
		return invalid("actor", "longer than %d bytes", MaxActorLen)
	}
	return checkPrintable("actor", actor, false)
}

func checkKind(field, kind string) error {
	if len(kind) > MaxKindLen {
		return invalid(field, "longer than %d bytes", MaxKindLen)
	}
	if !kindRE.MatchString(kind) {
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
	if len(labels) > MaxLabels {
		return invalid(field, "more than %d labels", MaxLabels)
	}
	for k, v := range labels {
		if err := checkKey(field+" key", k, MaxLabelLen); err != nil {
			return err
		}
		if len(v) > MaxLabelLen {
			return invalid(field, "value of %q longer than %d bytes", k, MaxLabelLen)
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
	if d < MinTTL || d > MaxTTL {
		return invalid(field, "%s is out of range [%s, %s]", d, MinTTL, MaxTTL)
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

func checkCond(c Cond) error {
	if err := checkVersion("if-version", c.IfVersion); err != nil {
		return err
	}
	if err := checkVersion("fence", c.Fence); err != nil {
		return err
	}
	return checkText("message", c.Message, MaxTextLen)
}

func checkRef(ref ArtifactRef) error {
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
		return tooLarge("content", "%d bytes is over the limit of %d", len(content), h.opts.MaxArtifactSize)
	}
	return nil
}

func (h *handle) checkOp(op Op) error {
	switch o := op.(type) {
	case CreateArtifactOp:
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
		if err := checkText("message", o.Message, MaxTextLen); err != nil {
			return err
		}
		return h.checkContent(o.Artifact.Content)
	case UpdateArtifactOp:
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
			if err := checkKey("owner", *c.Owner, MaxActorLen); err != nil {
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
	case DeleteArtifactOp:
		if err := checkRef(o.Ref); err != nil {
			return err
		}
		return checkCond(o.Cond)
	case RollbackArtifactOp:
		if err := checkRef(o.Ref); err != nil {
			return err
		}
		if o.To < 1 {
			return invalid("to", "rollback target version %d must be at least 1", o.To)
		}
		return checkCond(o.Cond)
	case CreateTaskOp:
		if err := checkKey("title", o.Task.Title, MaxTitleLen); err != nil {
			return err
		}
		if err := checkText("description", o.Task.Description, MaxTextLen); err != nil {
			return err
		}
		if err := checkOptionalID("parent id", o.Task.ParentID); err != nil {
			return err
		}
		if len(o.Task.DependsOn) > MaxDependsOn {
			return invalid("depends on", "more than %d dependencies", MaxDependsOn)
		}
		for _, d := range o.Task.DependsOn {
			if err := checkID("depends on", d); err != nil {
				return err
			}
		}
		if o.Task.Assignee != "" {
			if err := checkKey("assignee", o.Task.Assignee, MaxActorLen); err != nil {
				return err
			}
		}
		if err := checkPriority(o.Task.Priority); err != nil {
			return err
		}
		if err := checkLabels("labels", o.Task.Labels); err != nil {
			return err
		}
		return checkText("message", o.Message, MaxTextLen)
	case UpdateTaskOp:
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
			if err := checkKey("title", *c.Title, MaxTitleLen); err != nil {
				return err
			}
		}
		if c.Description != nil {
			if err := checkText("description", *c.Description, MaxTextLen); err != nil {
				return err
			}
		}
		if c.Assignee != nil && *c.Assignee != "" {
			if err := checkKey("assignee", *c.Assignee, MaxActorLen); err != nil {
				return err
			}
		}
		if c.Priority != nil {
			if err := checkPriority(*c.Priority); err != nil {
				return err
			}
		}
		if c.Result != nil {
			if err := checkText("result summary", c.Result.Summary, MaxTextLen); err != nil {
				return err
			}
			for _, n := range c.Result.Artifacts {
				if err := checkName("result artifact", n); err != nil {
					return err
				}
			}
		}
		return checkLabels("labels", c.Labels)
	case PutNoteOp:
		if err := checkKind("note kind", o.Note.Kind); err != nil {
			return err
		}
		if err := checkKey("note key", o.Note.Key, MaxKeyLen); err != nil {
			return err
		}
		if err := checkText("note title", o.Note.Title, MaxTitleLen); err != nil {
			return err
		}
		if err := checkText("note body", o.Note.Body, MaxTextLen); err != nil {
			return err
		}
		return checkCond(o.Cond)
	case DeleteNoteOp:
		if err := checkKind("note kind", o.Kind); err != nil {
			return err
		}
		if err := checkKey("note key", o.Key, MaxKeyLen); err != nil {
			return err
		}
		return checkCond(o.Cond)
	case ReleaseLockOp:
		if err := checkKey("resource", o.Resource, MaxNameLen); err != nil {
			return err
		}
		if o.Token < 1 {
			return invalid("token", "%d: a lease token is at least 1", o.Token)
		}
		return checkText("message", o.Message, MaxTextLen)
	case nil:
		return invalid("op", "is nil")
	}
	return invalid("op", "unknown op type %T", op)
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
