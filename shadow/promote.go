package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace"
)

// Promotion is what Promote did.
type Promotion struct {
	ID       string `json:"id"`
	Shadow   string `json:"shadow"`
	Diff     Diff   `json:"diff"`
	Artifact string `json:"artifact"` // the artifact holding the promotion's unified diff
}

// DiffArtifactKind is the kind of the artifacts that keep promotions' diffs.
const DiffArtifactKind = "diff"

// Promote applies the shadow's diff to the real directory, all or nothing,
// if a passing validation of exactly this diff is recorded and no file it
// touches changed in the real tree since the base (else a *ConflictError
// listing them, recorded as shadow.conflicted). It records shadow.promoted
// with the diff stored as an artifact, and the shadow's base becomes the
// promoted state, so work can go on in it.
func (m *Manager) Promote(ctx context.Context, ref, actor string) (Promotion, error) {
	return m.promote(ctx, ref, actor, "")
}

// promote promotes the diff as actor's work (its validation, its rights);
// by ("" for actor) records the promotion: a checkpoint records as its
// operator while actor is paused.
func (m *Manager) promote(ctx context.Context, ref, actor, by string) (Promotion, error) {
	md, err := m.load(ref)
	if err != nil {
		return Promotion{}, err
	}
	if actor == "" {
		actor = md.Actor
	}
	if by == "" {
		by = actor
	}
	if md.State != StateOpen {
		return Promotion{}, fmt.Errorf("shadow %s is %s: %w", md.ID, md.State, workspace.ErrInvalid)
	}
	var p Promotion
	err = m.withDir(ctx, md.Dir, true, func() error {
		md, err = m.load(md.ID) // a recovery may have moved its base
		if err != nil {
			return err
		}
		d, err := diffOf(md)
		if err != nil {
			return err
		}
		if err := bound(md.Validated, d.Hash, actor); err != nil {
			return fmt.Errorf("shadow %s: %w", md.ID, err)
		}
		if err := m.stillAllowed(ctx, actor, d); err != nil {
			return fmt.Errorf("shadow %s: %w", md.ID, err)
		}
		if len(d.Changes) == 0 {
			p = Promotion{Shadow: md.ID, Diff: d}
			return nil
		}
		if moved, err := conflicts(md, d); err != nil {
			return err
		} else if len(moved) > 0 {
			cerr := &ConflictError{Shadow: md.ID, Paths: moved}
			if rerr := m.record(ctx, md, by, EventConflicted, strings.Join(moved, ", ")); rerr != nil {
				return errors.Join(cerr, rerr)
			}
			return cerr
		}
		unified := changeList(d)
		j := journal{Promotion: newID(), Shadow: md.ID, Dir: md.Dir, Actor: actor, By: by, Diff: d, Unified: unified, At: m.opts.Now().UTC()}
		if err := m.stageAndCommit(ctx, md, &j); err != nil {
			return err
		}
		p = Promotion{ID: j.Promotion, Shadow: md.ID, Diff: d, Artifact: diffArtifactName(j)}
		return m.finish(ctx, m.dirState(md.Dir), j)
	})
	return p, err
}

// stillAllowed checks the diff's paths against the policy in force now:
// one changed since the validation may refuse what it passed. A refusal
// is the policy's error (a *workspace.ForbiddenError for the workspace's).
func (m *Manager) stillAllowed(ctx context.Context, actor string, d Diff) error {
	c := &checker{actor: actor, policy: m.opts.Policy, as: principalOf(ctx, actor)}
	if c.policy == nil {
		w, err := m.ws.WriteCheck(ctx)
		if err != nil {
			return err
		}
		c.writes = w
	}
	for _, ch := range d.Changes {
		for i, p := range ch.touched() {
			if err := c.role(ctx, "file:", p, ch.Kind == Deleted || (ch.Kind == Renamed && i == 0)); err != nil {
				return err
			}
		}
	}
	return nil
}

// conflicts lists the paths the diff touches whose real file is no longer
// the base's (or, for new paths, exists already).
func conflicts(md meta, d Diff) ([]string, error) {
	root, err := os.OpenRoot(md.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var moved []string
	for _, p := range d.Paths() {
		base, inBase := md.Base[p]
		cur, err := realEntry(root, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if inBase {
				moved = append(moved, p)
			}
		case errors.Is(err, ErrUnsafePath):
			return nil, fmt.Errorf("shadow %s: %w", md.ID, err)
		case err != nil:
			moved = append(moved, p) // unreadable now: not what the base saw
		case !inBase || cur != base:
			moved = append(moved, p)
		}
	}
	return moved, nil
}

// realEntry reads the entry at p in the real tree without following links
// at any component.
func realEntry(root *os.Root, p string) (Entry, error) {
	if err := checkParents(root, p); err != nil {
		return Entry{}, err
	}
	info, err := root.Lstat(p)
	if err != nil {
		return Entry{}, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		t, err := root.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		return Entry{Hash: hashString(t), Mode: fs.ModeSymlink | 0o777, Size: int64(len(t)), Link: t}, nil
	case info.Mode().IsRegular():
		return hashFile(filepath.Join(root.Name(), filepath.FromSlash(p)))
	}
	return Entry{}, fmt.Errorf("%w: %s is a %s", ErrUnsafePath, p, info.Mode().Type())
}

// checkParents refuses a path whose parent components in root are links
// (or not directories): a write there would land elsewhere.
func checkParents(root *os.Root, p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		info, err := root.Lstat(q)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return fmt.Errorf("%w: %s is not a directory (%s)", ErrUnsafePath, q, info.Mode().Type())
		}
	}
	return nil
}

// stageAndCommit writes the plan, stages every new file beside its target
// (synced), and commits the journal: after it returns nil the promotion
// will complete, now or at recovery.
func (m *Manager) stageAndCommit(ctx context.Context, md meta, j *journal) error {
	real, err := os.OpenRoot(md.Dir)
	if err != nil {
		return err
	}
	defer real.Close()
	sh, err := os.OpenRoot(md.Path)
	if err != nil {
		return err
	}
	defer sh.Close()
	made := map[string]bool{}
	for i, c := range j.Diff.Changes {
		if c.Kind == Deleted || c.Kind == Renamed {
			from := c.Path
			if c.Kind == Renamed {
				from = c.From
			}
			j.Ops = append(j.Ops, jop{Path: from, Delete: true})
		}
		if c.Kind == Deleted {
			continue
		}
		if c.New.isLink() && linkEscapes(c.Path, c.New.Link) {
			return fmt.Errorf("shadow %s: %w: %s links out of the tree", md.ID, ErrUnsafePath, c.Path)
		}
		if err := checkParents(real, c.Path); err != nil {
			return err
		}
		for d := path.Dir(c.Path); d != "."; d = path.Dir(d) {
			if _, err := real.Lstat(d); errors.Is(err, fs.ErrNotExist) {
				made[d] = true
			}
		}
		stage := path.Join(path.Dir(c.Path), fmt.Sprintf(".shadow-%s-%d.new", j.Promotion[12:], i))
		j.Ops = append(j.Ops, jop{Path: c.Path, Stage: stage, Entry: c.New})
	}
	// A rename's removal of its old path must not remove the new file when
	// paths coincide by case-folding or otherwise: deletions go first.
	slices.SortStableFunc(j.Ops, func(a, b jop) int {
		switch {
		case a.Delete == b.Delete:
			return 0
		case a.Delete:
			return -1
		}
		return 1
	})
	for d := range made {
		j.MadeDirs = append(j.MadeDirs, d)
	}
	slices.SortFunc(j.MadeDirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	st := m.dirState(md.Dir)
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(st, "plan.json"), b); err != nil {
		return err
	}
	step()
	if err := stage(real, sh, j); err != nil {
		if uerr := undo(*j); uerr != nil {
			return errors.Join(err, uerr)
		}
		return errors.Join(err, os.Remove(filepath.Join(st, "plan.json")))
	}
	if err := os.Rename(filepath.Join(st, "plan.json"), filepath.Join(st, "commit.json")); err != nil {
		return err
	}
	if err := syncDir(st); err != nil {
		return err
	}
	step()
	return nil
}

// stage makes the directories and writes the staged files, checking each
// against the hash the validation saw.
func stage(real, sh *os.Root, j *journal) error {
	for _, d := range j.MadeDirs {
		if err := real.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		step()
	}
	for _, op := range j.Ops {
		if op.Delete {
			continue
		}
		if op.Entry.isLink() {
			if err := real.Symlink(op.Entry.Link, op.Stage); err != nil {
				return err
			}
			step()
			continue
		}
		if err := copyChecked(real, sh, op); err != nil {
			return err
		}
		step()
	}
	// Durable before the commit: every staged file, then every directory
	// holding one. The fsyncs run a few at once, so the file system can
	// commit them together rather than one journal commit per file.
	var syncs []func() error
	for _, op := range j.Ops {
		if !op.Delete && !op.Entry.isLink() {
			syncs = append(syncs, func() error { return syncFile(real, op.Stage) })
		}
	}
	if err := parallel(syncs); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, op := range j.Ops {
		dirs[path.Dir(op.Path)] = true
	}
	syncs = syncs[:0]
	for d := range dirs {
		syncs = append(syncs, func() error { return syncDir(filepath.Join(j.Dir, filepath.FromSlash(d))) })
	}
	return parallel(syncs)
}

// syncFile fsyncs the file p of root.
func syncFile(root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// parallel runs fns on a few goroutines and returns the first error (in
// fns' order).
func parallel(fns []func() error) error {
	errs := make([]error, len(fns))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(8, len(fns)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fns[i]()
			}
		}()
	}
	for i := range fns {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// copyChecked copies op.Path from the shadow to op.Stage in the real tree
// (stage syncs it), refusing it unless its bytes hash to the validated hash.
func copyChecked(real, sh *os.Root, op jop) error {
	info, err := sh.Lstat(op.Path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s in the shadow is no longer a regular file", ErrUnsafePath, op.Path)
	}
	in, err := openNoFollow(filepath.Join(sh.Name(), filepath.FromSlash(op.Path)))
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := real.OpenFile(op.Stage, os.O_WRONLY|os.O_CREATE|os.O_EXCL, op.Entry.Mode.Perm())
	if err != nil {
		return err
	}
	h := newHasher()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Chmod(op.Entry.Mode.Perm()) // umask must not change the promoted mode
	}

	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && h.sum() != op.Entry.Hash {
		err = fmt.Errorf("%w: %s changed in the shadow since validation", ErrNotValidated, op.Path)
	}
	return err
}

// changeList is what a promotion's diff artifact holds: each change's
// kind, paths, modes and content hashes, and no content. The artifact is
// read under its own name (shadows/**), so a copy of the files' text in it
// would let whoever reads shadows/** read what the policy forbids under
// the files' own names; the real directory holds the content.
func changeList(d Diff) string {
	var out strings.Builder
	for _, c := range d.Changes {
		switch c.Kind {
		case Renamed:
			fmt.Fprintf(&out, "renamed %s -> %s", c.From, c.Path)
		default:
			fmt.Fprintf(&out, "%s %s", c.Kind, c.Path)
		}
		if c.Old != nil && c.New != nil && c.Old.Mode != c.New.Mode {
			fmt.Fprintf(&out, " mode %o -> %o", uint32(c.Old.Mode), uint32(c.New.Mode))
		}
		switch {
		case c.Old != nil && c.New != nil && c.Old.Hash != c.New.Hash:
			fmt.Fprintf(&out, " sha256 %s -> %s", c.Old.Hash, c.New.Hash)
		case c.New != nil:
			fmt.Fprintf(&out, " sha256 %s", c.New.Hash)
		case c.Old != nil:
			fmt.Fprintf(&out, " was sha256 %s", c.Old.Hash)
		}
		out.WriteByte('\n')
	}
	return out.String()
}

func diffArtifactName(j journal) string {
	return "shadows/" + j.Shadow + "/promotion-" + j.Promotion + ".diff"
}

// recordPromotion writes shadow.promoted and the diff artifact in one
// batch (idempotent by the promotion id), then moves the shadow's base.
func (m *Manager) recordPromotion(ctx context.Context, j journal) error {
	md, err := m.load(j.Shadow)
	if err != nil {
		return err
	}
	for _, c := range j.Diff.Changes {
		if c.Kind == Renamed {
			delete(md.Base, c.From)
		}
		if c.New == nil {
			delete(md.Base, c.Path)
		} else {
			md.Base[c.Path] = *c.New
		}
	}
	md.Validated = nil
	md.Promoted++
	b, _ := json.Marshal(j.Diff) // plain structs: cannot fail
	by := j.By
	if by == "" {
		by = j.Actor
	}
	_, err = m.ws.Commit(shadowKey.Grant(ctx), workspace.Batch{
		Actor:          by,
		IdempotencyKey: "shadow-promote-" + j.Promotion,
		Ops: []workspace.Op{
			workspace.CreateArtifactOp{
				Artifact: workspace.NewArtifact{
					Name: diffArtifactName(j), Kind: DiffArtifactKind, Content: []byte(j.Unified), ContentType: "text/plain",
					Labels: map[string]string{"shadow": j.Shadow, "dir": truncate(j.Dir, 200), "diff_hash": j.Diff.Hash, "changes": fmt.Sprint(len(j.Diff.Changes))},
				},
				Message: message(EventPromoted, j.Shadow, fmt.Sprintf("%d changes; changes: %s", len(j.Diff.Changes), truncate(string(b), 1000))),
			},
			workspace.PutNoteOp{Note: noteOf(md), Cond: workspace.Cond{Message: message(EventPromoted, j.Shadow, fmt.Sprintf("promotion %s, %d changes", j.Promotion, len(j.Diff.Changes)))}},
		},
	})
	if err != nil {
		return fmt.Errorf("record promotion %s: %w", j.Promotion, err)
	}
	return m.saveMeta(md, true)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// bound checks that v is a passing validation of the diff with hash h,
// made by actor: leases are judged from the validator's side, so another
// actor's validation does not vouch for this one's promotion.
func bound(v *Validation, h, actor string) error {
	switch {
	case v == nil:
		return fmt.Errorf("%w: validate first", ErrNotValidated)
	case !v.Passed:
		noun := "violations"
		if len(v.Violations) == 1 {
			noun = "violation"
		}
		return fmt.Errorf("%w: the last validation found %d %s", ErrNotValidated, len(v.Violations), noun)
	case v.DiffHash != h:
		return fmt.Errorf("%w: the diff changed since it was validated", ErrNotValidated)
	case v.Actor != actor:
		return fmt.Errorf("%w: validated by %s, promoted by %s", ErrNotValidated, v.Actor, actor)
	}
	return nil
}
