package shadow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentspace/agentspace/internal/linediff"
)

// ChangeKind is how a file differs from the base.
type ChangeKind string

// The kinds of change.
const (
	Added    ChangeKind = "added"
	Modified ChangeKind = "modified"
	Deleted  ChangeKind = "deleted"
	Renamed  ChangeKind = "renamed" // same content under a new path
)

// Change is one file of a diff. Renamed changes name both paths; the
// others leave From empty.
type Change struct {
	Kind ChangeKind `json:"kind"`
	Path string     `json:"path"`
	From string     `json:"from,omitempty"`
	Old  *Entry     `json:"old,omitempty"`
	New  *Entry     `json:"new,omitempty"`
}

// touched lists the real-tree paths the change writes or removes.
func (c Change) touched() []string {
	if c.Kind == Renamed {
		return []string{c.From, c.Path}
	}
	return []string{c.Path}
}

// Diff is a shadow against its base. Hash names exactly this set of
// changes and contents: a validation holds for the diff with its hash.
type Diff struct {
	Shadow  string    `json:"shadow"`
	Changes []Change  `json:"changes"`
	Skipped []Skipped `json:"skipped,omitempty"` // special files in the shadow, never promoted
	Hash    string    `json:"hash"`
}

// Paths lists every path the diff touches, in order.
func (d Diff) Paths() []string {
	var out []string
	for _, c := range d.Changes {
		out = append(out, c.touched()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Diff compares the shadow's files with its base.
func (m *Manager) Diff(ctx context.Context, ref string) (Diff, error) {
	md, err := m.load(ref)
	if err != nil {
		return Diff{}, err
	}
	return diffOf(md)
}

func diffOf(md meta) (Diff, error) {
	cur, skipped, err := md.scanShadow()
	if err != nil {
		return Diff{}, fmt.Errorf("shadow %s: %w", md.ID, err)
	}
	if err := md.resolveBase(cur, false); err != nil {
		return Diff{}, fmt.Errorf("shadow %s: %w", md.ID, err)
	}
	d := compare(md.Base, cur)
	d.Shadow = md.ID
	d.Skipped = skipped
	return d, nil
}

// compare lists the changes from base to cur, pairing a deleted and an
// added path with the same content as a rename.
func compare(base, cur Manifest) Diff {
	var added, deleted []string
	var d Diff
	for p, n := range cur { // the changes are sorted below: no need to sort 20,000 paths
		o, ok := base[p]
		switch {
		case !ok:
			added = append(added, p)
		case o != n:
			d.Changes = append(d.Changes, Change{Kind: Modified, Path: p, Old: &o, New: &n})
		}
	}
	if len(base) != len(cur)-len(added) { // else every base path is in cur
		for p := range base {
			if _, ok := cur[p]; !ok {
				deleted = append(deleted, p)
			}
		}
	}
	slices.Sort(added)
	slices.Sort(deleted) // renames pair in path order
	used := map[string]bool{}
	for _, p := range added {
		n := cur[p]
		from := ""
		for _, q := range deleted {
			if !used[q] && base[q] == n {
				from = q
				break
			}
		}
		if from != "" {
			used[from] = true
			o := base[from]
			d.Changes = append(d.Changes, Change{Kind: Renamed, Path: p, From: from, Old: &o, New: &n})
			continue
		}
		d.Changes = append(d.Changes, Change{Kind: Added, Path: p, New: &n})
	}
	for _, p := range deleted {
		if !used[p] {
			o := base[p]
			d.Changes = append(d.Changes, Change{Kind: Deleted, Path: p, Old: &o})
		}
	}
	slices.SortFunc(d.Changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	d.Hash = diffHash(d.Changes)
	return d
}

// diffHash names a list of changes (in path order) and their contents.
func diffHash(changes []Change) string {
	h := sha256.New()
	for _, c := range changes {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\n", c.Kind, c.Path, c.From, entryKey(c.Old), entryKey(c.New))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func entryKey(e *Entry) string {
	if e == nil {
		return "-"
	}
	return fmt.Sprintf("%s:%o:%s", e.Hash, uint32(e.Mode), e.Link)
}

// maxDiffFile is the largest file whose text Unified shows line by line.
const maxDiffFile = 4 << 20

// Unified renders the diff as a unified diff: the base side read from the
// real tree (while its file still has the base's content), the new side
// from the shadow. Binary and oversized files are named, not shown.
func (m *Manager) Unified(ctx context.Context, ref string, d Diff) (string, error) {
	md, err := m.load(ref)
	if err != nil {
		return "", err
	}
	var out string
	err = m.withDir(ctx, md.Dir, false, func() error {
		out, err = renderUnified(md.Dir, md.Path, d)
		return err
	})
	return out, err
}

// renderUnified renders d of the shadow tree sh against the real tree dir.
func renderUnified(dir, shTree string, d Diff) (string, error) {
	real, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer real.Close()
	sh, err := os.OpenRoot(shTree)
	if err != nil {
		return "", err
	}
	defer sh.Close()
	var out strings.Builder
	for _, c := range d.Changes {
		out.WriteString(unifiedOne(real, sh, c))
	}
	return out.String(), nil
}

func unifiedOne(real, sh *os.Root, c Change) string {
	oldName, newName := "a/"+c.Path, "b/"+c.Path
	var oldText, newText []byte
	var ok = true
	switch c.Kind {
	case Added:
		oldName = "/dev/null"
		newText, ok = readEntry(sh, c.Path, c.New)
	case Deleted:
		newName = "/dev/null"
		oldText, ok = readEntry(real, c.Path, c.Old)
	case Renamed:
		return fmt.Sprintf("rename from %s\nrename to %s\n", c.From, c.Path)
	case Modified:
		var ok2 bool
		oldText, ok = readEntry(real, c.Path, c.Old)
		newText, ok2 = readEntry(sh, c.Path, c.New)
		ok = ok && ok2
	}
	head := ""
	if c.Old != nil && c.New != nil && c.Old.Mode != c.New.Mode {
		head = fmt.Sprintf("old mode %o\nnew mode %o\n", uint32(c.Old.Mode), uint32(c.New.Mode))
	}
	if !ok || !isText(oldText) || !isText(newText) {
		return head + fmt.Sprintf("Binary files %s and %s differ\n", oldName, newName)
	}
	return head + linediff.Unified(oldName, newName, string(oldText), string(newText), 3)
}

// readEntry reads the file at p in root if it still is e (a link's target
// for links); false when it is gone, changed, too big or unreadable.
func readEntry(root *os.Root, p string, e *Entry) ([]byte, bool) {
	if e.isLink() {
		t, err := root.Readlink(p)
		return []byte(t + "\n"), err == nil && t == e.Link
	}
	if e.Size > maxDiffFile {
		return nil, false
	}
	info, err := root.Lstat(p)
	if err != nil || !info.Mode().IsRegular() {
		return nil, false
	}
	f, err := root.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDiffFile+1))
	return b, err == nil && hashBytes(b) == e.Hash
}

func isText(b []byte) bool {
	return utf8.Valid(b) && !bytes.ContainsRune(b, 0)
}

// scanShadow scans the shadow's tree with its stat cache (stat.bin, kept
// beside the tree; losing it only costs hashing again).
func (md meta) scanShadow() (Manifest, []Skipped, error) {
	path := filepath.Join(filepath.Dir(md.Path), "stat.bin")
	cur, skipped, next, err := scanCached(md.Path, readCache(path))
	if err != nil {
		return nil, nil, err
	}
	if next != nil {
		writeCache(path, next)
	}
	return cur, skipped, nil
}

// snapshotDir is where Open keeps a second reflink of every file it
// cloned: the base's content of entries whose hash is deferred.
func (md meta) snapshotDir() string { return filepath.Join(filepath.Dir(md.Path), "snapshot") }

// resolveBase hashes, from the snapshot, every deferred entry (Open's
// clones, whose hash was never read) that a comparison with cur needs:
// base entries cur lacks or differs from, and cur entries (stat cache
// hits of such clones) that differ from the base; with all, every one.
// It changes md.Base (and cur) in place, not on disk: hashing a few
// changed files again costs less than rewriting the base each diff.
//
// The invariant that makes this safe: an entry is deferred only when Open
// made it, from a file it cloned twice, into the tree and the snapshot;
// the snapshot is never written after, and every later change of a base
// entry (promotion, rebase, discard) stores a hash.
func (md meta) resolveBase(cur Manifest, all bool) error {
	snap := ""
	resolve := func(p string, e *Entry) error {
		if e.Hash != "" {
			return nil
		}
		if snap == "" {
			snap = md.snapshotDir()
		}
		got, err := hashFile(filepath.Join(snap, filepath.FromSlash(p)))
		if err != nil {
			return fmt.Errorf("base snapshot: %w", err)
		}
		if got.Size != e.Size {
			return fmt.Errorf("base snapshot: %s is %d bytes, the base says %d", p, got.Size, e.Size)
		}
		e.Hash = got.Hash
		return nil
	}
	for p, b := range md.Base {
		if b.Hash != "" {
			continue
		}
		n, inCur := cur[p]
		if !all && inCur && n == b {
			continue
		}
		old := b
		if err := resolve(p, &b); err != nil {
			return err
		}
		md.Base[p] = b
		if inCur && n == old { // the same clone, unchanged: the same hash
			cur[p] = b
		}
	}
	for p, n := range cur {
		if n.Hash == "" {
			if b, ok := md.Base[p]; !ok || b != n {
				if err := resolve(p, &n); err != nil {
					return err
				}
				cur[p] = n
			}
		}
	}
	return nil
}
