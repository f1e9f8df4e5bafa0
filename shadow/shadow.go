package shadow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentspace/agentspace/internal/reserve"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// NoteKind is the kind of the notes that record shadows: each shadow is the
// note (NoteKind, its id), and each step of its life is a put of that note
// whose event message starts with the step's name (shadow.opened, …).
const NoteKind = "shadow"

// shadowKey is the capability to write shadow records: the kind is
// reserved, so a plain note write cannot plant or edit one.
var shadowKey = reserve.Own(NoteKind, nil)

// Event names, carried as the first word of the message of the note put
// (or batch) that records each step.
const (
	EventOpened     = "shadow.opened"
	EventValidated  = "shadow.validated"
	EventPromoted   = "shadow.promoted"
	EventDiscarded  = "shadow.discarded"
	EventConflicted = "shadow.conflicted"
	EventRebased    = "shadow.rebased"
)

// States of a shadow.
const (
	StateOpen      = "open"
	StateDiscarded = "discarded"
)

// Options configure a Manager.
type Options struct {
	// Root is the directory holding the shadows, their manifests and the
	// promotion journals. Every Manager acting on one real directory must
	// use the same Root: its journal is how a cut promotion is finished.
	Root string
	// Validators are shell commands run in the shadow (sh -c) by Validate;
	// a non-zero exit is a violation of rule "command".
	Validators []string
	// ValidatorTimeout bounds each validator command (default 2 minutes).
	ValidatorTimeout time.Duration
	// Policy, when set, replaces the workspace's policy in checking each
	// changed path against the actor's roles; nil: the workspace's policy
	// (none stored: every path is allowed).
	Policy PathPolicy
	// Areas returns the path areas a task declares; default TaskAreas.
	Areas AreasFunc
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Manager opens, validates, promotes and discards shadows of directories.
// It is safe for concurrent use; several Managers (in several processes)
// may share one Root.
type Manager struct {
	ws   *workspace.Workspace
	opts Options
}

// New returns a Manager over ws keeping its shadows under opts.Root.
func New(ws *workspace.Workspace, opts Options) (*Manager, error) {
	if opts.Root == "" {
		return nil, &workspace.InvalidError{Field: "root", Reason: "is required"}
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	if opts.ValidatorTimeout <= 0 {
		opts.ValidatorTimeout = 2 * time.Minute
	}
	if opts.Areas == nil {
		opts.Areas = TaskAreas
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(root, "dirs"), 0o750); err != nil {
		return nil, err
	}
	return &Manager{ws: ws, opts: opts}, nil
}

// Shadow is one shadow copy of a real directory.
type Shadow struct {
	ID        string      `json:"id"`
	Dir       string      `json:"dir"`  // the real directory, absolute
	Path      string      `json:"path"` // the copy the agent works in
	Task      string      `json:"task_id,omitempty"`
	Actor     string      `json:"actor"`
	State     string      `json:"state"`
	CreatedAt time.Time   `json:"created_at"`
	Reflinked bool        `json:"reflinked"` // the copy shares blocks copy-on-write
	Skipped   []Skipped   `json:"skipped,omitempty"`
	Validated *Validation `json:"validation,omitempty"`
	Promoted  int         `json:"promotions"`
}

// meta is what a shadow keeps on disk beside its copy.
type meta struct {
	Shadow
	Base Manifest `json:"-"` // in base.bin: written only when the base moves
}

// OpenRequest is what Open takes.
type OpenRequest struct {
	Dir   string // the real directory to shadow
	Actor string // who works in the shadow
	Task  string // optional: the task the work is for (its areas bound the diff)
}

// Open copies req.Dir into a new shadow, records its base manifest and the
// shadow.opened event, and returns it. Several shadows of one directory may
// be open at once.
func (m *Manager) Open(ctx context.Context, req OpenRequest) (Shadow, error) {
	if req.Actor == "" {
		return Shadow{}, &workspace.InvalidError{Field: "actor", Reason: "is required"}
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return Shadow{}, err
	}
	if info, err := os.Lstat(dir); err != nil {
		return Shadow{}, fmt.Errorf("shadow open %s: %w", dir, err)
	} else if !info.IsDir() {
		return Shadow{}, fmt.Errorf("shadow open %s: %w: not a directory", dir, ErrUnsafePath)
	}
	if inside(m.opts.Root, dir) || inside(dir, m.opts.Root) {
		return Shadow{}, &workspace.InvalidError{Field: "dir", Reason: "must not hold, or be inside, the shadows' root " + m.opts.Root}
	}
	if req.Task != "" {
		if _, err := m.ws.Tasks().Get(ctx, req.Task); err != nil {
			return Shadow{}, fmt.Errorf("shadow open: task %s: %w", req.Task, err)
		}
	}
	id := newID()
	home := filepath.Join(m.opts.Root, id)
	if err := os.Mkdir(home, 0o750); err != nil {
		return Shadow{}, err
	}
	md := meta{Shadow: Shadow{ID: id, Dir: dir, Path: filepath.Join(home, "tree"), Task: req.Task, Actor: req.Actor, State: StateOpen, CreatedAt: m.opts.Now().UTC()}}
	err = m.withDir(ctx, dir, false, func() error {
		// The base is the copy's manifest, made while copying: the copy is
		// what the agent starts from. Its stat cache is kept, so the first
		// diff hashes only what changed.
		st, err := copyTree(dir, md.Path, md.snapshotDir())
		if err != nil {
			return err
		}
		md.Reflinked = st.Cloned > 0
		md.Skipped = st.Skipped
		md.Base = st.Base
		writeCache(filepath.Join(home, "stat.bin"), st.Cache)
		return nil
	})
	if err == nil {
		err = m.saveMeta(md, true)
	}
	if err == nil {
		err = m.record(ctx, md, req.Actor, EventOpened, "")
	}
	if err != nil {
		_ = os.RemoveAll(home)
		return Shadow{}, fmt.Errorf("shadow open %s: %w", dir, err)
	}
	return md.Shadow, nil
}

// Get returns the shadow named by its id or by its path (or a path inside it).
func (m *Manager) Get(ctx context.Context, ref string) (Shadow, error) {
	md, err := m.loadSummary(ref)
	return md.Shadow, err
}

// List returns the shadows under the Manager's root, oldest first.
func (m *Manager) List(ctx context.Context) ([]Shadow, error) {
	ents, err := os.ReadDir(m.opts.Root)
	if err != nil {
		return nil, err
	}
	var out []Shadow
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "dirs" {
			continue
		}
		md, err := m.loadSummary(e.Name())
		if errors.Is(err, workspace.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, md.Shadow)
	}
	slices.SortFunc(out, func(a, b Shadow) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// load reads a shadow's meta and base by id or path.
func (m *Manager) load(ref string) (meta, error) {
	md, err := m.loadSummary(ref)
	if err != nil {
		return md, err
	}
	md.Base, err = readBase(filepath.Join(m.opts.Root, md.ID))
	if err != nil {
		return meta{}, fmt.Errorf("shadow %s: base manifest: %w", md.ID, err)
	}
	return md, nil
}

// loadSummary reads a shadow's meta without its base.
func (m *Manager) loadSummary(ref string) (meta, error) {
	id := ref
	if strings.ContainsRune(ref, filepath.Separator) {
		abs, err := filepath.Abs(ref)
		if err != nil {
			return meta{}, err
		}
		rel, err := filepath.Rel(m.opts.Root, abs)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return meta{}, fmt.Errorf("shadow %s: %w: not under %s", ref, workspace.ErrNotFound, m.opts.Root)
		}
		id, _, _ = strings.Cut(filepath.ToSlash(rel), "/")
	}
	if !validID(id) {
		return meta{}, fmt.Errorf("shadow %q: %w", ref, workspace.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(m.opts.Root, id, "meta.json")) // #nosec G304 -- id is checked to be a plain shadow id
	if errors.Is(err, fs.ErrNotExist) {
		return meta{}, fmt.Errorf("shadow %s: %w", ref, workspace.ErrNotFound)
	}
	if err != nil {
		return meta{}, err
	}
	var md meta
	if err := json.Unmarshal(b, &md); err != nil {
		return meta{}, fmt.Errorf("shadow %s: corrupt meta.json: %w", id, err)
	}
	return md, nil
}

// saveMeta replaces a shadow's meta atomically, and its base first when
// withBase (a crash in between leaves a new base under an old meta, whose
// validation then no longer matches the diff: safe).
func (m *Manager) saveMeta(md meta, withBase bool) error {
	if withBase {
		if err := writeBase(filepath.Join(m.opts.Root, md.ID), md.Base); err != nil {
			return err
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(m.opts.Root, md.ID, "meta.json"), b)
}

// record puts the shadow's note: its event is the step's record.
func (m *Manager) record(ctx context.Context, md meta, actor, step, detail string) error {
	_, err := m.ws.Notes().Put(shadowKey.Grant(ctx), workspace.Write{Actor: actor, Message: message(step, md.ID, detail)}, noteOf(md))
	return err
}

// noteOf is the note that records a shadow: its summary, without the manifest.
func noteOf(md meta) workspace.NotePut {
	b, _ := json.Marshal(md.Shadow) // a plain struct: cannot fail
	return workspace.NotePut{Kind: NoteKind, Key: md.ID, Title: "shadow of " + md.Dir, Body: string(b)}
}

func message(step, id, detail string) string {
	msg := step + " " + id
	if detail != "" {
		msg += ": " + detail
	}
	if len(msg) > 4000 {
		msg = msg[:4000] + "…"
	}
	return msg
}

// newID returns a time-ordered id: the time in hex, then random bits.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%012x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

func validID(id string) bool {
	if len(id) != 24 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// inside reports whether p is dir or below it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writeAtomic replaces path with b: temp file, fsync, rename, fsync of the directory.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- a file of this package's own root
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir) // #nosec G304 -- a directory this package writes in
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
