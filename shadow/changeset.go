package shadow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentspace/agentspace/internal/reserve"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// ChangeSetKind is the kind of the notes that hold change sets: each set
// is the note (ChangeSetKind, its name), so staged content stays out of
// artifact reads, and each step is a put of it whose message starts with
// the step's name (changeset.staged, .validated, .promoted, .discarded,
// .conflicted). The kind and the record's JSON are this package's own:
// retention reads none of it, and keeps a promoted version by the pin its
// promotion wrote (see Promote).
//
// A set's record is read, on every face, only by a principal whose policy
// lets it read every artifact the set names (the engine checks it: the
// kind is reserved with recordArtifacts), and only an open set holds
// staged content: a promoted set keeps each change's hash, its content
// being the versions it wrote; a discarded set keeps nothing staged.
const ChangeSetKind = "changeset"

// PromotedVersion names one artifact version a promotion wrote, in a
// set's record (for people and PinPromoted; retention keeps it by its
// pin). An update names its artifact by ID (Version is its base version
// plus one); a created artifact, whose ID the promoting batch assigns, is
// named by Name at Version 1 with its content's SHA256.
type PromotedVersion struct {
	ID      string `json:"id,omitempty"`
	Name    string `json:"name"`
	Version int64  `json:"version"`
	SHA256  string `json:"sha256,omitempty"`
}

// changeSetKey is the capability to write change-set records: the kind is
// reserved, so a plain note write cannot plant or edit a set. It also pins
// what a promotion writes (Pins): those pins are the system's bookkeeping,
// so the promoter needs no pin right.
var changeSetKey = reserve.Own(ChangeSetKind, recordArtifacts)

// recordArtifacts lists every artifact name a change set's record holds:
// the staged changes' names, the versions it promoted, the paths of its
// validation's violations.
func recordArtifacts(body string) ([]string, error) {
	var cs ChangeSet
	if err := json.Unmarshal([]byte(body), &cs); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range cs.Staged {
		out = append(out, s.touched()...)
	}
	for _, pv := range cs.Promoted {
		out = append(out, pv.Name)
	}
	if cs.Validated != nil {
		for _, v := range cs.Validated.Violations {
			if v.Path != "" {
				out = append(out, v.Path)
			}
		}
	}
	return out, nil
}

// Change-set steps, carried as the first word of their event messages.
const (
	EventStaged      = "changeset.staged"
	EventCSValidated = "changeset.validated"
	EventCSPromoted  = "changeset.promoted"
	EventCSDiscarded = "changeset.discarded"
	EventCSConflict  = "changeset.conflicted"
	EventCSUnpinned  = "changeset.unpinned"
)

// Staged operations.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpRename = "rename"
	OpDelete = "delete"
)

// Staged is one artifact's pending change. Update, rename and delete carry
// the artifact's id and the version the change started from.
type Staged struct {
	Op      string `json:"op"`
	Name    string `json:"name"`
	NewName string `json:"new_name,omitempty"` // rename
	Content []byte `json:"content,omitempty"`  // create, update, rename: the content to write, while the set is open
	// SHA256 is the hash of the content a promoted set wrote: promotion
	// drops the content from the record (the version it wrote holds it).
	SHA256      string `json:"sha256,omitempty"`
	Kind        string `json:"kind,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	BaseID      string `json:"base_id,omitempty"`
	BaseVersion int64  `json:"base_version,omitempty"`
	BaseSHA256  string `json:"base_sha256,omitempty"`
}

// target is the name the staged change leaves live (empty for a delete).
func (s Staged) target() string {
	switch s.Op {
	case OpDelete:
		return ""
	case OpRename:
		return s.NewName
	}
	return s.Name
}

// touched lists the names the change writes.
func (s Staged) touched() []string {
	if s.Op == OpRename {
		return []string{s.Name, s.NewName}
	}
	return []string{s.Name}
}

// ChangeSet is a named set of staged artifact changes.
type ChangeSet struct {
	Name      string      `json:"name"`
	Actor     string      `json:"actor"`
	Task      string      `json:"task_id,omitempty"`
	State     string      `json:"state"` // open, promoted, discarded
	Staged    []Staged    `json:"staged"`
	Validated *Validation `json:"validation,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	Version   int64       `json:"version"` // the note's version
	// Promoted lists the artifact versions this set's promotions wrote,
	// earlier ones of the same name included; each was pinned by the
	// batch that wrote it, so retention keeps it until it is unpinned.
	Promoted []PromotedVersion `json:"promoted,omitempty"`
}

// Change-set states besides StateOpen and StateDiscarded.
const StatePromoted = "promoted"

// ChangeSets stages artifact changes in named sets and promotes each set
// as one engine batch. It holds no state of its own: every set lives in
// the workspace, so it works on every backend and from many processes.
type ChangeSets struct{ m *Manager }

// NewChangeSets returns the change sets of ws; opts.Root is not used.
func NewChangeSets(ws *workspace.Workspace, opts Options) *ChangeSets {
	if opts.ValidatorTimeout <= 0 {
		opts.ValidatorTimeout = 2 * time.Minute
	}
	if opts.Areas == nil {
		opts.Areas = TaskAreas
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &ChangeSets{m: &Manager{ws: ws, opts: opts}}
}

// Begin starts the change set name for actor (and optionally a task). A
// name whose set is still open gives workspace.ErrAlreadyExists.
func (c *ChangeSets) Begin(ctx context.Context, name, actor, task string) (ChangeSet, error) {
	if err := workspace.ValidateName(name); err != nil {
		return ChangeSet{}, err
	}
	old, err := c.Get(ctx, name)
	switch {
	case err == nil && old.State == StateOpen:
		return ChangeSet{}, fmt.Errorf("change set %s: %w", name, workspace.ErrAlreadyExists)
	case err != nil && !errors.Is(err, workspace.ErrNotFound):
		return ChangeSet{}, err
	}
	if task != "" {
		if _, err := c.m.ws.Tasks().Get(ctx, task); err != nil {
			return ChangeSet{}, fmt.Errorf("change set %s: task %s: %w", name, task, err)
		}
	}
	// A name begun again carries the list of its earlier promotions'
	// versions (their pins keep them).
	cs := ChangeSet{Name: name, Actor: actor, Task: task, State: StateOpen, CreatedAt: c.m.opts.Now().UTC(), Version: old.Version, Promoted: old.Promoted}
	return c.save(ctx, cs, actor, EventStaged, "begun")
}

// Get returns the change set name.
func (c *ChangeSets) Get(ctx context.Context, name string) (ChangeSet, error) {
	n, err := c.m.ws.Notes().Get(ctx, ChangeSetKind, name)
	if err != nil {
		return ChangeSet{}, fmt.Errorf("change set %s: %w", name, err)
	}
	var cs ChangeSet
	if err := json.Unmarshal([]byte(n.Body), &cs); err != nil {
		return ChangeSet{}, fmt.Errorf("change set %s: corrupt note body: %w", name, err)
	}
	cs.Version = n.Version
	return cs, nil
}

// save puts the set's note, conditioned on the version read (0: new).
func (c *ChangeSets) save(ctx context.Context, cs ChangeSet, actor, step, detail string) (ChangeSet, error) {
	n, err := c.m.ws.Notes().Put(changeSetKey.Grant(ctx), workspace.Write{Actor: actor, IfVersion: cs.Version, Message: message(step, cs.Name, detail)}, csNote(cs))
	if err != nil {
		return ChangeSet{}, fmt.Errorf("change set %s: %w", cs.Name, err)
	}
	cs.Version = n.Version
	return cs, nil
}

func csNote(cs ChangeSet) workspace.NotePut {
	b, _ := json.Marshal(cs) // plain structs: cannot fail
	return workspace.NotePut{Kind: ChangeSetKind, Key: cs.Name, Title: "change set " + cs.Name, Body: string(b)}
}

// StageRequest is one change to stage. Op is OpCreate, OpUpdate, OpRename
// or OpDelete; NewName is for renames; Content for create and update;
// Kind and ContentType for create.
type StageRequest struct {
	Op          string
	Name        string
	NewName     string
	Content     []byte
	Kind        string
	ContentType string
}

// Stage adds a change to the open set, merged with what the set already
// stages for that artifact; the artifact's head is remembered as the base
// the first time the set touches it.
func (c *ChangeSets) Stage(ctx context.Context, set, actor string, r StageRequest) (ChangeSet, error) {
	if err := workspace.ValidateName(r.Name); err != nil {
		return ChangeSet{}, err
	}
	if r.Op == OpRename {
		if err := workspace.ValidateName(r.NewName); err != nil {
			return ChangeSet{}, err
		}
	}
	cs, err := c.Get(ctx, set)
	if err != nil {
		return ChangeSet{}, err
	}
	if cs.State != StateOpen {
		return ChangeSet{}, fmt.Errorf("change set %s is %s: %w", set, cs.State, workspace.ErrInvalid)
	}
	if err := c.merge(ctx, &cs, r); err != nil {
		return ChangeSet{}, fmt.Errorf("change set %s: %s %s: %w", set, r.Op, r.Name, err)
	}
	cs.Validated = nil
	// The message names no artifact: the note's events are read with note
	// rights, and an artifact's name is the artifact's to show.
	return c.save(ctx, cs, actor, EventStaged, fmt.Sprintf("%s, %d staged", r.Op, len(cs.Staged)))
}

// merge folds r into the set's staged changes.
func (c *ChangeSets) merge(ctx context.Context, cs *ChangeSet, r StageRequest) error {
	i := slices.IndexFunc(cs.Staged, func(s Staged) bool { return s.target() == r.Name })
	if r.Op != OpCreate && i < 0 {
		if slices.ContainsFunc(cs.Staged, func(s Staged) bool { return s.BaseID != "" && s.Name == r.Name }) {
			return fmt.Errorf("%w: the set already renames or deletes it", workspace.ErrNotFound)
		}
	}
	switch r.Op {
	case OpCreate:
		if i >= 0 {
			return workspace.ErrAlreadyExists
		}
		if _, err := c.m.ws.Artifacts().Get(ctx, workspace.ByName(r.Name)); err == nil {
			return workspace.ErrAlreadyExists
		} else if !errors.Is(err, workspace.ErrNotFound) {
			return err
		}
		cs.Staged = append(cs.Staged, Staged{Op: OpCreate, Name: r.Name, Content: r.Content, Kind: r.Kind, ContentType: r.ContentType})
	case OpUpdate:
		if i >= 0 {
			cs.Staged[i].Content = r.Content
			return nil
		}
		s, err := c.base(ctx, OpUpdate, r.Name)
		if err != nil {
			return err
		}
		s.Content = r.Content
		cs.Staged = append(cs.Staged, s)
	case OpDelete:
		switch {
		case i >= 0 && cs.Staged[i].Op == OpCreate:
			cs.Staged = slices.Delete(cs.Staged, i, i+1)
		case i >= 0:
			cs.Staged[i] = Staged{Op: OpDelete, Name: cs.Staged[i].Name, BaseID: cs.Staged[i].BaseID, BaseVersion: cs.Staged[i].BaseVersion, BaseSHA256: cs.Staged[i].BaseSHA256}
		default:
			s, err := c.base(ctx, OpDelete, r.Name)
			if err != nil {
				return err
			}
			s.Content = nil
			cs.Staged = append(cs.Staged, s)
		}
	case OpRename:
		if r.NewName == r.Name || slices.ContainsFunc(cs.Staged, func(s Staged) bool { return s.target() == r.NewName }) {
			return workspace.ErrAlreadyExists
		}
		if _, err := c.m.ws.Artifacts().Get(ctx, workspace.ByName(r.NewName)); err == nil {
			return workspace.ErrAlreadyExists
		} else if !errors.Is(err, workspace.ErrNotFound) {
			return err
		}
		switch {
		case i >= 0 && cs.Staged[i].Op == OpCreate:
			cs.Staged[i].Name = r.NewName
		case i >= 0:
			cs.Staged[i].Op, cs.Staged[i].NewName = OpRename, r.NewName
		default:
			s, err := c.base(ctx, OpRename, r.Name)
			if err != nil {
				return err
			}
			s.NewName = r.NewName
			cs.Staged = append(cs.Staged, s)
		}
	default:
		return &workspace.InvalidError{Field: "op", Reason: "must be create, update, rename or delete"}
	}
	return nil
}

// base reads the head of name as the start of a staged change.
func (c *ChangeSets) base(ctx context.Context, op, name string) (Staged, error) {
	a, err := c.m.ws.Artifacts().Get(ctx, workspace.ByName(name))
	if err != nil {
		return Staged{}, err
	}
	return Staged{Op: op, Name: name, Content: a.Content, Kind: a.Kind, ContentType: a.ContentType, BaseID: a.ID, BaseVersion: a.Version, BaseSHA256: a.SHA256}, nil
}

// SetChange is one line of a change set's diff.
type SetChange struct {
	Op          string `json:"op"`
	Name        string `json:"name"`
	NewName     string `json:"new_name,omitempty"`
	BaseVersion int64  `json:"base_version,omitempty"`
	OldSHA256   string `json:"old_sha256,omitempty"`
	NewSHA256   string `json:"new_sha256,omitempty"`
	Old         []byte `json:"-"` // the base version's content
	New         []byte `json:"-"`
}

// SetDiff is a change set against the heads it started from. Hash names
// exactly these changes.
type SetDiff struct {
	Set     string      `json:"set"`
	Changes []SetChange `json:"changes"`
	Hash    string      `json:"hash"`
}

// Diff lists the set's changes against the versions they started from.
func (c *ChangeSets) Diff(ctx context.Context, set string) (SetDiff, error) {
	cs, err := c.Get(ctx, set)
	if err != nil {
		return SetDiff{}, err
	}
	return c.diffOf(ctx, cs)
}

func (c *ChangeSets) diffOf(ctx context.Context, cs ChangeSet) (SetDiff, error) {
	d := SetDiff{Set: cs.Name}
	h := sha256.New()
	for _, s := range cs.Staged {
		ch := SetChange{Op: s.Op, Name: s.Name, NewName: s.NewName, BaseVersion: s.BaseVersion, OldSHA256: s.BaseSHA256, New: s.Content}
		if s.Op != OpDelete {
			ch.NewSHA256 = s.newHash()
		}
		if s.SHA256 != "" {
			// A promoted change: its content is the version it wrote,
			// read as any artifact is (a version gc removed reads as nil).
			a, err := c.wrote(ctx, cs, s)
			if err != nil && !errors.Is(err, workspace.ErrNotFound) {
				return SetDiff{}, err
			}
			ch.New = a.Content
		}
		if s.BaseID != "" {
			old, err := c.m.ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: s.BaseID, Version: s.BaseVersion})
			if err != nil && !errors.Is(err, workspace.ErrNotFound) {
				return SetDiff{}, err
			}
			ch.Old = old.Content
		}
		d.Changes = append(d.Changes, ch)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00%s\n", s.Op, s.Name, s.NewName, s.BaseID, s.BaseVersion, ch.NewSHA256, s.Kind, s.ContentType)
	}
	d.Hash = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

// newHash is the hash of the content the change writes.
func (s Staged) newHash() string {
	if s.SHA256 != "" {
		return s.SHA256
	}
	return hashBytes(s.Content)
}

// wrote reads the version a promoted change s of cs wrote: the last of
// the set's promoted versions of its name with its hash.
func (c *ChangeSets) wrote(ctx context.Context, cs ChangeSet, s Staged) (workspace.Artifact, error) {
	for _, pv := range slices.Backward(cs.Promoted) {
		if pv.Name == s.target() && pv.SHA256 == s.SHA256 {
			return c.promotedVersion(ctx, pv)
		}
	}
	return workspace.Artifact{}, workspace.ErrNotFound
}

// Validate checks the set with the shadows' rules: each name against the
// task's areas, the policy ("artifact:NAME") and others' leases on
// artifact:NAME (or a prefix); the validator commands run in a directory
// holding the staged contents under their names. The outcome is recorded
// and bound to the diff's hash.
func (c *ChangeSets) Validate(ctx context.Context, set, actor string) (Validation, error) {
	cs, err := c.Get(ctx, set)
	if err != nil {
		return Validation{}, err
	}
	if actor == "" {
		actor = cs.Actor
	}
	d, err := c.diffOf(ctx, cs)
	if err != nil {
		return Validation{}, err
	}
	chk, err := c.m.newChecker(ctx, actor, cs.Task)
	if err != nil {
		return Validation{}, err
	}
	var vs []Violation
	for _, s := range cs.Staged {
		for i, n := range s.touched() {
			del := s.Op == OpDelete || (s.Op == OpRename && i == 0)
			vs = append(vs, chk.check(ctx, "artifact:", n, del)...)
		}
	}
	if len(c.m.opts.Validators) > 0 {
		cmdVs, err := c.runValidators(ctx, cs)
		if err != nil {
			return Validation{}, err
		}
		vs = append(vs, cmdVs...)
	}
	v := Validation{DiffHash: d.Hash, Passed: len(vs) == 0, Violations: vs, Actor: actor, At: c.m.opts.Now().UTC()}
	cs.Validated = &v
	_, err = c.save(ctx, cs, actor, EventCSValidated, summary(v))
	return v, err
}

// runValidators writes the staged contents into a temporary directory
// and runs each command there.
func (c *ChangeSets) runValidators(ctx context.Context, cs ChangeSet) ([]Violation, error) {
	dir, err := os.MkdirTemp("", "agentspace-changeset-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, s := range cs.Staged {
		t := s.target()
		if t == "" {
			continue
		}
		if d := filepath.Dir(t); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := root.WriteFile(t, s.Content, 0o644); err != nil {
			return nil, err
		}
	}
	var vs []Violation
	for _, cmd := range c.m.opts.Validators {
		if v, ok := runValidator(ctx, dir, cmd, c.m.opts.ValidatorTimeout); !ok {
			vs = append(vs, v)
		}
	}
	return vs, nil
}

// Promote commits the whole set as one batch, each change conditioned on
// its artifact still being at the version the set started from; a set
// whose artifacts moved gets a *ConflictError naming them (recorded as
// changeset.conflicted) and nothing is written. It needs a passing
// validation of exactly the set's current diff.
func (c *ChangeSets) Promote(ctx context.Context, set, actor string) (workspace.BatchResult, error) {
	cs, err := c.Get(ctx, set)
	if err != nil {
		return workspace.BatchResult{}, err
	}
	if actor == "" {
		actor = cs.Actor
	}
	if cs.State != StateOpen {
		return workspace.BatchResult{}, fmt.Errorf("change set %s is %s: %w", set, cs.State, workspace.ErrInvalid)
	}
	d, err := c.diffOf(ctx, cs)
	if err != nil {
		return workspace.BatchResult{}, err
	}
	if err := bound(cs.Validated, d.Hash, actor); err != nil {
		return workspace.BatchResult{}, fmt.Errorf("change set %s: %w", set, err)
	}
	moved, err := c.moved(ctx, cs)
	if err != nil {
		return workspace.BatchResult{}, err
	}
	if len(moved) > 0 {
		return workspace.BatchResult{}, c.conflict(ctx, cs, actor, moved)
	}
	var ops []workspace.Op
	var owner []int // ops[i] comes from cs.Staged[owner[i]]
	msg := message(EventCSPromoted, cs.Name, "")
	// Each version the batch writes is pinned by its own op (Pin), so
	// retention keeps it once the batch commits, with no pin right asked
	// of the promoter (the batch carries changeSetKey, reserved with
	// Pins); the promoted set's note, put in the same batch, lists them.
	// The promoted record keeps no copy of what it wrote: each change
	// keeps its content's hash, the versions hold the content.
	done := cs
	done.State = StatePromoted
	done.Promoted = slices.Clone(cs.Promoted)
	done.Staged = slices.Clone(cs.Staged)
	for i := range done.Staged {
		if s := &done.Staged[i]; s.Op != OpDelete {
			s.SHA256, s.Content = hashBytes(s.Content), nil
		}
	}
	for i, s := range cs.Staged {
		cond := workspace.Cond{IfVersion: s.BaseVersion, Message: msg}
		switch s.Op {
		case OpCreate:
			ops = append(ops, workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: s.Name, Kind: s.Kind, Content: s.Content, ContentType: s.ContentType, TaskID: cs.Task}, Message: msg, Pin: true})
			done.Promoted = append(done.Promoted, PromotedVersion{Name: s.Name, Version: 1, SHA256: hashBytes(s.Content)})
		case OpUpdate:
			ops = append(ops, workspace.UpdateArtifactOp{Ref: workspace.ByID(s.BaseID), Change: workspace.ArtifactChange{Content: nonNil(s.Content)}, Cond: cond, Pin: true})
			done.Promoted = append(done.Promoted, PromotedVersion{ID: s.BaseID, Name: s.Name, Version: s.BaseVersion + 1, SHA256: hashBytes(s.Content)})
		case OpDelete:
			ops = append(ops, workspace.DeleteArtifactOp{Ref: workspace.ByID(s.BaseID), Cond: cond})
		case OpRename:
			ops = append(ops,
				workspace.DeleteArtifactOp{Ref: workspace.ByID(s.BaseID), Cond: cond},
				workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: s.NewName, Kind: s.Kind, Content: s.Content, ContentType: s.ContentType, TaskID: cs.Task}, Message: msg, Pin: true})
			done.Promoted = append(done.Promoted, PromotedVersion{Name: s.NewName, Version: 1, SHA256: hashBytes(s.Content)})
			owner = append(owner, i)
		}
		owner = append(owner, i)
	}
	ops = append(ops, workspace.PutNoteOp{Note: csNote(done), Cond: workspace.Cond{IfVersion: cs.Version, Message: message(EventCSPromoted, cs.Name, fmt.Sprintf("%d changes", len(cs.Staged)))}})
	res, err := c.m.ws.Commit(changeSetKey.Grant(ctx), workspace.Batch{Actor: actor, Ops: ops})
	var be *workspace.BatchError
	if err != nil && errors.As(err, &be) && be.Index < len(owner) &&
		(errors.Is(err, workspace.ErrConflict) || errors.Is(err, workspace.ErrAlreadyExists) || errors.Is(err, workspace.ErrNotFound)) {
		return res, errors.Join(c.conflict(ctx, cs, actor, cs.Staged[owner[be.Index]].touched()), err)
	}
	return res, err
}

// moved lists the names whose artifacts are no longer where the set began.
func (c *ChangeSets) moved(ctx context.Context, cs ChangeSet) ([]string, error) {
	var out []string
	for _, s := range cs.Staged {
		if s.BaseID != "" {
			a, err := c.m.ws.Artifacts().Get(ctx, workspace.ByID(s.BaseID))
			switch {
			case errors.Is(err, workspace.ErrNotFound):
				out = append(out, s.Name)
			case err != nil:
				return nil, err
			case a.Version != s.BaseVersion:
				out = append(out, s.Name)
			}
		}
		if t := s.target(); t != "" && s.Op != OpUpdate {
			_, err := c.m.ws.Artifacts().Get(ctx, workspace.ByName(t))
			if err == nil {
				out = append(out, t)
			} else if !errors.Is(err, workspace.ErrNotFound) {
				return nil, err
			}
		}
	}
	return out, nil
}

func (c *ChangeSets) conflict(ctx context.Context, cs ChangeSet, actor string, moved []string) error {
	cerr := &ConflictError{Shadow: "change set " + cs.Name, Paths: moved}
	if _, err := c.save(ctx, cs, actor, EventCSConflict, fmt.Sprintf("%d artifacts moved", len(moved))); err != nil {
		return errors.Join(cerr, err)
	}
	return cerr
}

// Discard drops the set's staged changes: nothing of it reaches the artifacts.
func (c *ChangeSets) Discard(ctx context.Context, set, actor string) error {
	cs, err := c.Get(ctx, set)
	if err != nil {
		return err
	}
	if actor == "" {
		actor = cs.Actor
	}
	cs.State, cs.Staged, cs.Validated = StateDiscarded, nil, nil
	_, err = c.save(ctx, cs, actor, EventCSDiscarded, "")
	return err
}

// List returns the change sets (open and finished), by name.
func (c *ChangeSets) List(ctx context.Context) ([]ChangeSet, error) {
	var out []ChangeSet
	f := workspace.NoteFilter{Kind: ChangeSetKind, Limit: 1000}
	for {
		page, err := c.m.ws.Notes().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Notes {
			var cs ChangeSet
			if err := json.Unmarshal([]byte(n.Body), &cs); err != nil {
				return nil, fmt.Errorf("change set %s: corrupt note body: %w", n.Key, err)
			}
			cs.Version = n.Version
			cs.Staged = nil // the listing is a summary
			out = append(out, cs)
		}
		if page.Next == "" {
			return out, nil
		}
		f.After = page.Next
	}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
