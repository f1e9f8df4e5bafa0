package shadow

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one file of a tree as a manifest records it: a regular file
// (its content's hash and permission bits) or a symbolic link (the hash of
// its target).
type Entry struct {
	Hash string      `json:"hash"` // hex SHA-256 of the content, or of the link's target
	Mode fs.FileMode `json:"mode"` // permission bits, plus fs.ModeSymlink for links
	Size int64       `json:"size"`
	Link string      `json:"link,omitempty"` // a symbolic link's target
}

// isLink reports whether e is a symbolic link.
func (e Entry) isLink() bool { return e.Mode&fs.ModeSymlink != 0 }

// Manifest maps slash-separated paths, relative to a tree's root, to entries.
// Directories are not listed: a tree is the set of its files.
type Manifest map[string]Entry

// Skipped is a path a scan did not record, and why: device files, fifos
// and sockets are not content and are never copied or promoted.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// scan walks root without following links and records every regular file
// and symbolic link. Special files are returned as skipped; a file that
// cannot be read is an error naming it.
func scan(root string) (Manifest, []Skipped, error) {
	m, skipped, _, err := scanCached(root, nil)
	return m, skipped, err
}

// statKey is what must not have changed for a cached hash to hold: the
// inode, size and change time (which no one can set back, unlike mtime).
type statKey struct {
	Ino   uint64 `json:"i"`
	Size  int64  `json:"s"`
	Ctime int64  `json:"c"` // ns
	Mode  uint32 `json:"m"`
}

// statCache maps paths to the key their entry was hashed under, so that a
// rescan hashes only files that changed (as git's index does).
type statCache map[string]cachedEntry

type cachedEntry struct {
	Key   statKey `json:"k"`
	Entry Entry   `json:"e"`
}

// racyWindow: files changed this close to a scan are hashed again next
// time, since a write in the same clock tick leaves ctime as it was.
const racyWindow = 2 * time.Second

// scanCached is scan reusing the hashes of files whose statKey is the one
// cache recorded; it returns the cache for the next scan, or nil when that
// is cache itself.
func scanCached(root string, cache statCache) (Manifest, []Skipped, statCache, error) {
	start := time.Now()
	next := statCache{}
	dirty := false
	m := Manifest{}
	var skipped []Skipped
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("scan %s: %w", p, err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("scan %s: %w", p, err)
			}
			m[rel] = Entry{Hash: hashString(target), Mode: fs.ModeSymlink | 0o777, Size: int64(len(target)), Link: target}
		case t.IsRegular():
			var key statKey
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err == nil {
				key = statKey{Ino: st.Ino, Size: st.Size, Ctime: st.Ctim.Nano(), Mode: st.Mode}
				if c, ok := cache[rel]; ok && c.Key == key {
					m[rel] = c.Entry
					next[rel] = c
					return nil
				}
			}
			e, err := hashFile(p)
			if err != nil {
				return err
			}
			m[rel] = e
			dirty = true
			if key.Ino != 0 && start.Sub(time.Unix(0, key.Ctime)) > racyWindow {
				next[rel] = cachedEntry{Key: key, Entry: e}
			}
		default:
			skipped = append(skipped, Skipped{Path: rel, Reason: "special file (" + t.String() + ")"})
		}
		return nil
	})
	if !dirty && len(next) == len(cache) {
		next = nil // every entry came from cache: nothing to write back
	}
	return m, skipped, next, err
}

// hashFile hashes the regular file at p without following a link there.
func hashFile(p string) (Entry, error) {
	f, err := openNoFollow(p)
	if err != nil {
		return Entry{}, fmt.Errorf("scan %s: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Entry{}, fmt.Errorf("scan %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return Entry{}, fmt.Errorf("scan %s: %w: not a regular file", p, ErrUnsafePath)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Entry{}, fmt.Errorf("scan %s: %w", p, err)
	}
	return Entry{Hash: hex.EncodeToString(h.Sum(nil)), Mode: st.Mode().Perm(), Size: n}, nil
}

// openNoFollow opens p for reading, refusing a symbolic link at its last
// component and never blocking on a fifo.
func openNoFollow(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, p)
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func hashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func hashBytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// sortedPaths returns m's paths in order.
func (m Manifest) sortedPaths() []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// linkEscapes reports whether a link at path rel (inside a tree) with
// target would resolve outside the tree, judged lexically: absolute targets
// and targets that climb above the root escape.
func linkEscapes(rel, target string) bool {
	if target == "" || filepath.IsAbs(target) {
		return true
	}
	joined := filepath.Join(filepath.Dir(filepath.FromSlash(rel)), target)
	return joined == ".." || strings.HasPrefix(joined, ".."+string(filepath.Separator))
}

// hasher is a SHA-256 that reports in hex.
type hasher struct{ hash.Hash }

func newHasher() hasher      { return hasher{sha256.New()} }
func (h hasher) sum() string { return hex.EncodeToString(h.Sum(nil)) }
