package jsonstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// The backend never writes through a symbolic link, whoever planted it: a
// link in place of a directory of the tree (artifacts/, a note kind, a
// task's file, a blob's directory) could send a write outside the store, or
// onto another of its files. Before the commit point, every path a
// transaction writes, appends to, removes or mirrors is walked from the
// root with Lstat, and a link on the way refuses the whole transaction with
// a typed *workspace.InvalidError naming the path inside the store; nothing
// is written. The file helpers (mkdirs, replaceFile) refuse links again
// when a transaction is applied, for a link planted in between.

// symlinkError is the refusal of a write through p (relative to the
// store's directory), a symbolic link. It names no path outside the store.
func symlinkError(p string) error {
	return &workspace.InvalidError{Field: "path",
		Reason: fmt.Sprintf("%s in the json store is a symbolic link: the store never writes through one (remove it)", p)}
}

// checkLinks refuses rec if a path it writes passes through a symbolic
// link. Paths that do not exist yet end the walk: they are created as
// directories and files, never followed.
func (s *store) checkLinks(rec *record) error {
	seen := map[string]bool{}
	check := func(p string) error {
		cur := ""
		for _, seg := range strings.Split(p, "/") {
			cur = path.Join(cur, seg)
			if seen[cur] {
				continue
			}
			// One lstat of the whole path: its directories were checked
			// just before (a link among them was refused), so only the
			// last component can be a link, and Lstat does not follow it.
			// The apply, through os.Root, still refuses to leave DIR.
			fi, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(cur)))
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				// Not a link we could follow (a name too long for the file
				// system, a file where a directory would go): the write
				// itself reports what it cannot do.
				return nil
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				return symlinkError(cur)
			}
			seen[cur] = true
		}
		return nil
	}
	var paths []string
	for _, w := range rec.Writes {
		paths = append(paths, w.Path)
	}
	for _, a := range rec.Appends {
		paths = append(paths, a.Path)
	}
	paths = append(paths, rec.Removes...)
	for _, m := range rec.Mirror {
		paths = append(paths, artsDir+"/"+m.Name)
	}
	if len(rec.Events) > 0 || rec.Floor > 0 {
		paths = append(paths, eventsFile)
	}
	if rec.Floor > 0 {
		paths = append(paths, floorFile)
	}
	for _, p := range paths {
		if err := check(p); err != nil {
			return err
		}
	}
	return nil
}

// linkOr is err, the failure to open p (relative to root), unless p is a
// symbolic link: then the refusal says so (os.Root's own error would only
// say that the path escapes).
func linkOr(root *os.Root, p string, err error) error {
	if fi, lerr := root.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return symlinkError(p)
	}
	return err
}
