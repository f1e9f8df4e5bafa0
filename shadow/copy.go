package shadow

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// copyStats says how a tree was copied, and what the copy is: its
// manifest and the stat cache that vouches for it.
type copyStats struct {
	Files   int
	Bytes   int64
	Cloned  int // files shared copy-on-write (FICLONE)
	Skipped []Skipped
	Base    Manifest
	Cache   statCache
}

// copier copies a tree, a directory per goroutine while one is free.
type copier struct {
	src, dst string
	snap     string // where cloned files are cloned once more: the base's contents
	cloneOK  atomic.Bool
	sem      chan struct{}
	wg       sync.WaitGroup

	mu   sync.Mutex
	st   copyStats
	keys map[string]statKey
	fine bool // a ctime with a sub-second part: the file system keeps ns times
	errs map[string]error
}

// copyTree copies the files of src into dst (which must not exist) without
// following links: regular files by reflink where the file system has them,
// else by copying bytes; links as links; directories with their modes.
// Never a hard link: an in-place edit in the copy must not reach src.
//
// It returns the copy's manifest without reading the copy again: a copied
// file's hash is of the bytes written, and a cloned file's hash is
// deferred (Entry.Hash empty): each cloned file is cloned once more under
// snap, whose file is the base's content until the hash is needed
// (resolveBase). Nobody writes into the copy before Open returns its path,
// so the stat key taken after writing a file vouches for its entry, once
// its ctime is older than the racy margin (the cache holds only those).
func copyTree(src, dst, snap string) (copyStats, error) {
	c := &copier{src: src, dst: dst, snap: snap, keys: map[string]statKey{}}
	c.st.Base = Manifest{}
	c.cloneOK.Store(true)
	c.sem = make(chan struct{}, scanWorkers())
	info, err := os.Lstat(src)
	if err != nil {
		return c.st, err
	}
	if err := os.Mkdir(dst, info.Mode().Perm()|0o700); err != nil {
		return c.st, err
	}
	c.dir("")
	c.wg.Wait()
	if len(c.errs) > 0 {
		paths := slices.Sorted(maps.Keys(c.errs))
		return c.st, c.errs[paths[0]]
	}
	slices.SortFunc(c.st.Skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
	c.st.Cache = statCache{}
	edge := time.Now().Add(-racyMargin(c.fine)).UnixNano()
	for p, k := range c.keys {
		if k.Ctime < edge {
			c.st.Cache[p] = cachedEntry{Key: k, Entry: c.st.Base[p]}
		}
	}
	return c.st, nil
}

func (c *copier) fail(rel string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs == nil {
		c.errs = map[string]error{}
	}
	c.errs[rel] = err
}

// dir copies the directory rel (made already in dst) and its entries.
func (c *copier) dir(rel string) {
	from := filepath.Join(c.src, filepath.FromSlash(rel))
	ents, err := os.ReadDir(from)
	if err != nil {
		c.fail(rel, fmt.Errorf("copy %s: %w", from, err))
		return
	}
	snapMade := false
	for _, d := range ents {
		p := d.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		srcP := filepath.Join(c.src, filepath.FromSlash(p))
		dstP := filepath.Join(c.dst, filepath.FromSlash(p))
		switch t := d.Type(); {
		case t.IsDir():
			info, err := d.Info()
			if err == nil {
				err = os.Mkdir(dstP, info.Mode().Perm()|0o700)
			}
			if err != nil {
				c.fail(p, fmt.Errorf("copy %s: %w", srcP, err))
				continue
			}
			select {
			case c.sem <- struct{}{}:
				c.wg.Add(1)
				go func() {
					defer c.wg.Done()
					defer func() { <-c.sem }()
					c.dir(p)
				}()
			default:
				c.dir(p)
			}
		case t&fs.ModeSymlink != 0:
			link, err := os.Readlink(srcP)
			if err == nil {
				err = os.Symlink(link, dstP)
			}
			if err != nil {
				c.fail(p, fmt.Errorf("copy %s: %w", srcP, err))
				continue
			}
			c.mu.Lock()
			c.st.Files++
			c.st.Base[p] = Entry{Hash: hashString(link), Mode: fs.ModeSymlink | 0o777, Size: int64(len(link)), Link: link}
			c.mu.Unlock()
		case t.IsRegular():
			if c.snap != "" && !snapMade && c.cloneOK.Load() {
				if err := os.MkdirAll(filepath.Join(c.snap, filepath.FromSlash(rel)), 0o700); err != nil {
					c.fail(p, err)
					continue
				}
				snapMade = true
			}
			snapP := ""
			if snapMade {
				snapP = filepath.Join(c.snap, filepath.FromSlash(p))
			}
			r, err := copyOne(srcP, dstP, snapP, &c.cloneOK)
			if err != nil {
				c.fail(p, err)
				continue
			}
			c.mu.Lock()
			c.st.Files++
			c.st.Bytes += r.entry.Size
			if r.cloned {
				c.st.Cloned++
			}
			c.st.Base[p] = r.entry
			c.keys[p] = r.key
			c.fine = c.fine || r.key.Ctime%1e9 != 0
			c.mu.Unlock()
		default:
			c.mu.Lock()
			c.st.Skipped = append(c.st.Skipped, Skipped{Path: p, Reason: "special file (" + t.String() + ")"})
			c.mu.Unlock()
		}
	}
}

// copied is what copyOne made.
type copied struct {
	entry  Entry   // Hash empty when cloned (deferred to the snapshot)
	key    statKey // of the copy, after writing it
	cloned bool
}

// copyOne copies the regular file src to a new file dst with src's
// permission bits: a reflink while cloneOK holds (and, when snap is
// given, a second reflink of the copy at snap), else its bytes, hashed on
// the way. The first refusal to clone turns cloneOK off. A cloned file's
// entry has no hash: the caller defers it to snap, or has no use for it.
func copyOne(src, dst, snap string, cloneOK *atomic.Bool) (copied, error) {
	// Raw descriptors: os.File's poller bookkeeping is a few system calls
	// per file, which a tree of clones feels.
	in, err := unix.Open(src, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return copied{}, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, src)
		}
		return copied{}, &os.PathError{Op: "open", Path: src, Err: err}
	}
	defer func() { _ = unix.Close(in) }()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return copied{}, &os.PathError{Op: "stat", Path: src, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return copied{}, fmt.Errorf("copy %s: %w: not a regular file", src, ErrUnsafePath)
	}
	perm := st.Mode & 0o777
	out, err := unix.Open(dst, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, perm|0o200)
	if err != nil {
		return copied{}, &os.PathError{Op: "create", Path: dst, Err: err}
	}
	closed := false
	defer func() {
		if !closed {
			_ = unix.Close(out)
		}
	}()
	var r copied
	if cloneOK.Load() {
		r.cloned, err = clone(out, in)
		if err != nil {
			return copied{}, fmt.Errorf("clone %s: %w", src, err)
		}
		if !r.cloned {
			cloneOK.Store(false)
		}
	}
	if r.cloned && snap != "" {
		sf, err := unix.Open(snap, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return copied{}, &os.PathError{Op: "create", Path: snap, Err: err}
		}
		ok, err := clone(sf, out)
		if cerr := unix.Close(sf); err == nil {
			err = cerr
		}
		if err != nil || !ok {
			return copied{}, fmt.Errorf("clone %s to the base snapshot: %w", src, errors.Join(err, unix.EOPNOTSUPP))
		}
	}
	if !r.cloned {
		sum, n, err := copyHashing(out, in)
		if err != nil {
			return copied{}, fmt.Errorf("copy %s: %w", src, err)
		}
		r.entry = Entry{Hash: sum, Mode: fs.FileMode(perm), Size: n}
	}
	if err := unix.Fstat(out, &st); err != nil {
		return copied{}, &os.PathError{Op: "stat", Path: dst, Err: err}
	}
	if st.Mode&0o777 != perm { // the umask took bits, or 0o200 was added
		if err := unix.Fchmod(out, perm); err != nil {
			return copied{}, &os.PathError{Op: "chmod", Path: dst, Err: err}
		}
		if err := unix.Fstat(out, &st); err != nil {
			return copied{}, &os.PathError{Op: "stat", Path: dst, Err: err}
		}
	}
	if r.cloned { // the hash is deferred to snap (or, without one, not wanted)
		r.entry = Entry{Mode: fs.FileMode(perm), Size: st.Size}
	}
	r.key = keyOf(&st)
	closed = true
	if err := unix.Close(out); err != nil {
		return copied{}, &os.PathError{Op: "close", Path: dst, Err: err}
	}
	return r, nil
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyHashing copies the rest of in to out and returns the SHA-256 of
// what it wrote, and how many bytes.
func copyHashing(out, in int) (string, int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	h := newHasher()
	var total int64
	for {
		n, err := unix.Read(in, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", total, err
		}
		if n == 0 {
			return h.sum(), total, nil
		}
		h.Write(buf[:n]) // #nosec G104 -- a hash.Hash never fails to write
		for w := buf[:n]; len(w) > 0; {
			k, err := unix.Write(out, w)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return "", total, err
			}
			w = w[k:]
		}
		total += int64(n)
	}
}

// clone makes dst share src's blocks (FICLONE); false when the file
// system cannot (none, or another file system).
func clone(dst, src int) (bool, error) {
	err := unix.IoctlFileClone(dst, src)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EXDEV),
		errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return false, nil
	}
	return false, err
}

// copyFile copies the regular file src to a new file dst with src's
// permission bits, by reflink where it can; it returns the bytes and
// whether it cloned.
func copyFile(src, dst string, cloneOK *bool) (int64, bool, error) {
	var ok atomic.Bool
	ok.Store(*cloneOK)
	r, err := copyOne(src, dst, "", &ok)
	*cloneOK = ok.Load()
	return r.entry.Size, r.cloned, err
}

// ReflinksAvailable reports whether the file system holding dir shares
// file contents copy-on-write (FICLONE), by cloning a small file there.
func ReflinksAvailable(dir string) (bool, error) {
	tmp, err := os.MkdirTemp(dir, ".reflink-probe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "a")
	if err := os.WriteFile(src, []byte("probe"), 0o600); err != nil {
		return false, err
	}
	ok := true
	if _, _, err := copyFile(src, filepath.Join(tmp, "b"), &ok); err != nil {
		return false, err
	}
	return ok, nil
}
