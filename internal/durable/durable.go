// Package durable makes a file and the directory entry that names it
// survive a power cut: it fsyncs the file, renames it into place, and
// fsyncs the directory. Backups, exports and the CLI's atomic writes use
// it, so a function that says it wrote a file has made it durable.
package durable

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"sync"
)

var (
	mu      sync.Mutex
	observe func(path string) // a test's record of what was synced
)

// Observe calls fn with the path of each file or directory synced from
// now on, until the returned func is called. It is for tests that show a
// write is durable.
func Observe(fn func(path string)) (stop func()) {
	mu.Lock()
	observe = fn
	mu.Unlock()
	return func() {
		mu.Lock()
		observe = nil
		mu.Unlock()
	}
}

func synced(path string) {
	mu.Lock()
	fn := observe
	mu.Unlock()
	if fn != nil {
		fn(path)
	}
}

// SyncFile fsyncs the file at path (and may set its mode first, when mode
// is not 0).
func SyncFile(path string, mode os.FileMode) error {
	f, err := os.Open(path) // #nosec G304 -- a file the caller just wrote
	if err != nil {
		return err
	}
	if mode != 0 {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		synced(path)
	}
	return err
}

// SyncDir fsyncs the directory dir, making the entries created or
// renamed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir) // #nosec G304 -- a directory the caller writes in
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		synced(dir)
	}
	return err
}

// Rename moves the synced file from to to and syncs to's directory.
func Rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(to))
}

// WriteFile writes path through a temporary file of mode 0600 in its
// directory, synced and renamed into place, so that a failed or
// interrupted write never leaves a truncated file under the name and a
// finished one survives a power cut.
func WriteFile(path string, fn func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<16)
	err = fn(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	synced(f.Name())
	return Rename(f.Name(), path)
}
