package jsonstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"github.com/agentspace/agentspace/workspace"
)

// Permissions of everything the backend creates: the workspace may hold
// private plans and code, so only its owner reads it.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// tmpPrefix starts every temporary file's name. Artifact names with a
// segment starting with it are refused, so a sweep never removes content.
const tmpPrefix = ".agentspace-tmp-"

// errSymlink reports a symbolic link found where the backend writes while
// it applies a transaction (links.go refuses them before the commit point).
var errSymlink = &workspace.InvalidError{Field: "path", Reason: "a symbolic link in the json store: the store never writes through one (remove it)"}

// writeFault is nil outside tests. A test sets it to fail the backend's
// writes as a full disk would (see diskfull_test.go): before each write of
// name, a non-nil error from it makes the write stop half-way with that error.
var writeFault atomic.Pointer[func(name string) error]

// injectedFault returns the error a test asked for writing name, if any.
func injectedFault(name string) error {
	if f := writeFault.Load(); f != nil {
		return (*f)(name)
	}
	return nil
}

// dirSet collects the directories whose entries changed, to fsync each once.
type dirSet map[string]struct{}

func randHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mkdirs creates dir and its missing parents inside root, refusing symbolic
// links and non-directories on the way, and records each parent whose
// entries changed.
func mkdirs(root *os.Root, dir string, dirs dirSet) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := ""
	for _, seg := range strings.Split(dir, "/") {
		parent := cur
		if parent == "" {
			parent = "."
		}
		cur = path.Join(cur, seg)
		fi, err := root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(cur, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			dirs[parent] = struct{}{}
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s: %w", cur, errSymlink)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", cur)
		}
	}
	return nil
}

// writeAtomic replaces name with data: a temporary file in the same
// directory, fsync, rename. The directory is recorded in dirs for the
// caller to fsync once; readers see the old or the new file, never a part.
func writeAtomic(root *os.Root, name string, data []byte, dirs dirSet) error {
	return replaceFile(root, name, data, dirs, true)
}

// replaceFile is writeAtomic, without the fsync of the file unless durable
// is set: a committed transaction's files need none, as the journal holds
// them until a checkpoint syncs them.
func replaceFile(root *os.Root, name string, data []byte, dirs dirSet, durable bool) error {
	dir := path.Dir(name)
	if err := mkdirs(root, dir, dirs); err != nil {
		return err
	}
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", name, errSymlink)
		}
		return fmt.Errorf("%s is not a regular file", name)
	}
	tmp := path.Join(dir, tmpPrefix+randHex())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	if err = injectedFault(name); err != nil {
		_, _ = f.Write(data[:len(data)/2])
	} else {
		_, err = f.Write(data)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	dirs[dir] = struct{}{}
	return nil
}

// overwriteFile writes data as the whole content of the file rel of root
// (name relative to DIR) in place, creating it, without fsync. Only for files that readers read under the lock. It
// writes over the old bytes and cuts what is left, rather than opening
// with O_TRUNC: truncating to zero makes some file systems (ext4's
// auto_da_alloc) start writing the file back at once.
func overwriteFile(root *os.Root, rel, name string, data []byte) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE, fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err = injectedFault(name); err != nil {
		_, _ = f.WriteAt(data[:len(data)/2], 0)
	} else {
		_, err = f.WriteAt(data, 0)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil && fi.Size() > int64(len(data)) {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// appendAt writes data at offset at of the file rel of root (name
// relative to DIR; created if missing) and cuts
// the file just after it (no fsync: see replaceFile); its directory must
// exist. at is where the file ended when
// the append was committed; a file now shorter than that lost committed
// lines, which is reported rather than papered over with a hole.
func appendAt(root *os.Root, rel, name string, at int64, data []byte) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < at {
		err = corrupt(name, "is %d bytes long, but a committed append starts at byte %d", fi.Size(), at)
	}
	if err == nil {
		if ferr := injectedFault(name); ferr != nil {
			_, _ = f.WriteAt(data[:len(data)/2], at)
			err = ferr
		} else {
			_, err = f.WriteAt(data, at)
		}
	}
	if end := at + int64(len(data)); err == nil && fi.Size() > end {
		err = f.Truncate(end)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", name, err)
	}
	return nil
}

// removeFile removes name if it is there (a regular file only).
func removeFile(root *os.Root, name string, dirs dirSet) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: not removing it", name)
	}
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dirs[path.Dir(name)] = struct{}{}
	return nil
}

// syncDirs fsyncs every directory in dirs, making renames and removals durable.
func syncDirs(root *os.Root, dirs dirSet) error {
	for d := range dirs {
		f, err := root.Open(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since (an emptied mirror directory)
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", d, err)
		}
	}
	return nil
}

// syncFiles fsyncs each file of names that still exists.
func syncFiles(root *os.Root, names map[string]bool) error {
	for name := range names {
		f, err := root.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a later transaction
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", name, err)
		}
	}
	return nil
}

// addParents records every directory above name, up to the root.
func addParents(dirs dirSet, name string) {
	for d := path.Dir(name); ; d = path.Dir(d) {
		dirs[d] = struct{}{}
		if d == "." || d == "/" {
			return
		}
	}
}

// sweepTemps removes temporary files a crashed writer left in dir.
func sweepTemps(root *os.Root, dir string) {
	f, err := root.Open(dir)
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	_ = f.Close()
	for _, n := range names {
		if strings.HasPrefix(n, tmpPrefix) {
			_ = root.Remove(path.Join(dir, n))
		}
	}
}

// encodeKey turns a free-form key (a note key, a lock resource, an
// idempotency key) into one file name: lower-case letters, digits, '-', '_'
// and inner '.' stay; every other byte, upper-case letters included, becomes
// %XX. So distinct keys never share a file, even on a case-insensitive file
// system, and no key is ".", ".." or hidden. Keys too long for a file name
// become "~" and their SHA-256; the file's content always holds the key.
func encodeKey(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > 180 {
		sum := sha256.Sum256([]byte(s))
		return "~" + hex.EncodeToString(sum[:])
	}
	return b.String()
}
