package shadow

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one file of a tree as a manifest records it: a regular file
// (its content's hash and permission bits) or a symbolic link (the hash of
// its target).
type Entry struct {
	// Hash is the hex SHA-256 of the content, or of the link's target. In
	// a shadow's base only, it is empty for a file Open cloned and nobody
	// has needed the hash of yet: the shadow's snapshot holds its content
	// (see resolveBase); a Diff never carries an empty one.
	Hash string      `json:"hash"`
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
// inode, size, change time (which no one can set back, unlike mtime),
// modification time and mode.
type statKey struct {
	Ino   uint64
	Size  int64
	Ctime int64 // ns
	Mtime int64 // ns
	Mode  uint32
}

func keyOf(st *unix.Stat_t) statKey {
	return statKey{Ino: st.Ino, Size: st.Size, Ctime: st.Ctim.Nano(), Mtime: st.Mtim.Nano(), Mode: st.Mode}
}

// statCache maps paths to the key their entry was hashed under, so that a
// rescan hashes only files that changed (as git's index does).
type statCache map[string]cachedEntry

type cachedEntry struct {
	Key   statKey
	Entry Entry
}

// racyMargin: a file whose ctime is this close to the start of the scan
// that hashed it is not cached, and is hashed again next time. This is
// git's "racily clean" problem: a write in the same clock tick as the one
// the cache saw leaves size and times as they were. The cache trusts a key
// only if its ctime is older than the scan's start by more than the file
// system's timestamp granularity plus the kernel's coarse clock lag (one
// tick, at most 10 ms), so any write after the scan read the file has a
// later ctime. The granularity is judged from the ctimes the scan saw: any
// with a sub-second part means nanosecond times (ext4, XFS, btrfs, tmpfs):
// 50 ms; none (FAT keeps 2 s, some others 1 s): 2 s. Inode, size, mtime
// or mode moving also misses the cache; ctime cannot be set by anyone, so
// only a clock stepped back could fool it, as it would git.
func racyMargin(fine bool) time.Duration {
	if fine {
		return 50 * time.Millisecond
	}
	return 2 * time.Second
}

// scanCached is scan reusing the hashes of files whose statKey is the one
// cache recorded; it returns the cache for the next scan, or nil when that
// is cache itself.
//
// It reads each directory once (getdents), stats its files relative to the
// directory's descriptor (fstatat, no path lookup from the root), walks
// subdirectories on a few goroutines, and hashes the files the cache
// misses in parallel after the walk.
func scanCached(root string, cache statCache) (Manifest, []Skipped, statCache, error) {
	s := &scanner{root: root, cache: cache, start: time.Now(), m: make(Manifest, len(cache)), fresh: statCache{}}
	s.sem = make(chan struct{}, scanWorkers())
	s.walk("")
	s.wg.Wait()
	if err := s.firstErr(); err != nil {
		return nil, nil, nil, err
	}
	if err := s.hashMisses(); err != nil {
		return nil, nil, nil, err
	}
	slices.SortFunc(s.skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
	if len(s.misses) == 0 && len(s.hits) == len(cache) {
		return s.m, s.skipped, nil, nil // every entry came from cache: nothing to write back
	}
	next := make(statCache, len(s.hits)+len(s.fresh))
	for _, p := range s.hits {
		next[p] = cache[p]
	}
	maps.Copy(next, s.fresh)
	return s.m, s.skipped, next, nil
}

// scanWorkers is how many goroutines walk or hash at once: the walk
// mostly waits in system calls, so a few more than the cores.
func scanWorkers() int { return min(2*runtime.GOMAXPROCS(0), 8) }

type scanner struct {
	root  string
	cache statCache
	start time.Time
	sem   chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	m       Manifest
	hits    []string  // paths whose cached entry held
	fresh   statCache // entries hashed now, old enough to cache
	skipped []Skipped
	misses  []miss
	fine    bool             // a ctime with a sub-second part: the file system keeps ns times
	errs    map[string]error // by path: the first in path order is returned
}

// miss is a file the cache could not vouch for: hashed after the walk.
type miss struct {
	rel string
	key statKey
}

func (s *scanner) fail(rel string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[string]error{}
	}
	s.errs[rel] = err
}

func (s *scanner) firstErr() error {
	if len(s.errs) == 0 {
		return nil
	}
	paths := make([]string, 0, len(s.errs))
	for p := range s.errs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return s.errs[paths[0]]
}

// walk reads the directory rel (relative to the root, "" for the root)
// and records its entries, walking subdirectories on another goroutine
// when one is free, else on this one.
func (s *scanner) walk(rel string) {
	dir := filepath.Join(s.root, filepath.FromSlash(rel))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		s.fail(rel, fmt.Errorf("scan %s: %w", dir, &os.PathError{Op: "open", Path: dir, Err: err}))
		return
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		s.fail(rel, fmt.Errorf("scan %s: %w", dir, err))
		return
	}
	type rec struct {
		rel string
		e   Entry
		hit bool
	}
	var recs []rec
	var misses []miss
	fine := false
	var skipped []Skipped
	for _, d := range ents {
		name := d.Name()
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		switch t := d.Type(); {
		case t.IsDir():
			select {
			case s.sem <- struct{}{}:
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					defer func() { <-s.sem }()
					s.walk(p)
				}()
			default:
				s.walk(p)
			}
		case t&fs.ModeSymlink != 0:
			target, err := readlinkat(fd, name)
			if err != nil {
				s.fail(p, fmt.Errorf("scan %s: %w", filepath.Join(dir, name), err))
				continue
			}
			recs = append(recs, rec{rel: p, e: Entry{Hash: hashString(target), Mode: fs.ModeSymlink | 0o777, Size: int64(len(target)), Link: target}})
		case t.IsRegular():
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				misses = append(misses, miss{rel: p}) // hashing names the error
				continue
			}
			key := keyOf(&st)
			fine = fine || key.Ctime%1e9 != 0
			if c, ok := s.cache[p]; ok && c.Key == key {
				recs = append(recs, rec{rel: p, e: c.Entry, hit: true})
				continue
			}
			misses = append(misses, miss{rel: p, key: key})
		default:
			skipped = append(skipped, Skipped{Path: p, Reason: "special file (" + t.String() + ")"})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.m[r.rel] = r.e
		if r.hit {
			s.hits = append(s.hits, r.rel)
		}
	}
	s.misses = append(s.misses, misses...)
	s.skipped = append(s.skipped, skipped...)
	s.fine = s.fine || fine
}

// hashMisses hashes the files the cache missed, a few at a time, and
// caches those whose ctime is old enough to trust (racyMargin).
func (s *scanner) hashMisses() error {
	if len(s.misses) == 0 {
		return nil
	}
	edge := s.start.Add(-racyMargin(s.fine)).UnixNano()
	work := make(chan miss)
	var wg sync.WaitGroup
	for range min(scanWorkers(), len(s.misses)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ms := range work {
				e, err := hashFile(filepath.Join(s.root, filepath.FromSlash(ms.rel)))
				if err != nil {
					s.fail(ms.rel, err)
					continue
				}
				s.mu.Lock()
				s.m[ms.rel] = e
				if ms.key.Ino != 0 && ms.key.Ctime < edge {
					s.fresh[ms.rel] = cachedEntry{Key: ms.key, Entry: e}
				}
				s.mu.Unlock()
			}
		}()
	}
	for _, ms := range s.misses {
		work <- ms
	}
	close(work)
	wg.Wait()
	return s.firstErr()
}

// readlinkat reads the target of the link name in the directory fd.
func readlinkat(fd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		k, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(buf[:k]), nil
		}
	}
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
