package shadow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// copyStats says how a tree was copied.
type copyStats struct {
	Files   int
	Bytes   int64
	Cloned  int // files shared copy-on-write (FICLONE)
	Skipped []Skipped
}

// copyTree copies the files of src into dst (which must not exist) without
// following links: regular files by reflink where the file system has them,
// else by copying bytes; links as links; directories with their modes.
// Never a hard link: an in-place edit in the copy must not reach src.
func copyTree(src, dst string, cloneOK *bool) (copyStats, error) {
	var st copyStats
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case t&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			st.Files++
			return os.Symlink(link, target)
		case t.IsRegular():
			n, cloned, err := copyFile(p, target, cloneOK)
			if err != nil {
				return err
			}
			st.Files++
			st.Bytes += n
			if cloned {
				st.Cloned++
			}
			return nil
		default:
			st.Skipped = append(st.Skipped, Skipped{Path: filepath.ToSlash(rel), Reason: "special file (" + t.String() + ")"})
			return nil
		}
	})
	return st, err
}

// copyFile copies the regular file src to a new file dst with src's
// permission bits. It tries a reflink first while *cloneOK holds, and
// stops trying after the first refusal (the file system has none).
func copyFile(src, dst string, cloneOK *bool) (int64, bool, error) {
	in, err := openNoFollow(src)
	if err != nil {
		return 0, false, err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return 0, false, err
	}
	if !info.Mode().IsRegular() {
		return 0, false, fmt.Errorf("copy %s: %w: not a regular file", src, ErrUnsafePath)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm()|0o200) // #nosec G304 -- dst is inside a tree this package made
	if err != nil {
		return 0, false, err
	}
	cloned := false
	if *cloneOK {
		err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
		switch {
		case err == nil:
			cloned = true
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EXDEV),
			errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			*cloneOK = false
		default:
			_ = out.Close()
			return 0, false, fmt.Errorf("clone %s: %w", src, err)
		}
	}
	if !cloned {
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return 0, false, fmt.Errorf("copy %s: %w", src, err)
		}
	}
	if err := out.Chmod(info.Mode().Perm()); err != nil {
		_ = out.Close()
		return 0, false, err
	}
	return info.Size(), cloned, out.Close()
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
