package backup

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/agentspace/agentspace/workspace"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// WithTokens restores the token records too: credentials that act as
	// their actors. Without it a backup, or a file made to look like one,
	// grants nobody access.
	WithTokens bool
}

// RestoreReport is what Restore read and what the restored store's check
// found.
type RestoreReport struct {
	Import   workspace.ImportReport
	Verified workspace.VerifyReport
}

// Source is a backup opened for reading as an archive: an archive file
// itself, or the archive of a SQLite file copy, exported from a scratch
// copy of it as it is read (the backup is never opened for writing).
type Source struct {
	io.Reader
	close func()
}

// Close releases the source: the file, or the scratch copy and its store.
func (s *Source) Close() error {
	s.close()
	return nil
}

// Open opens the backup at path (see Newest for a directory) as a Source.
func Open(ctx context.Context, path string) (*Source, error) {
	f, err := os.Open(path) // #nosec G304 -- the backup the caller named
	if err != nil {
		return nil, err
	}
	if !isSQLiteFile(f) {
		return &Source{Reader: f, close: func() { _ = f.Close() }}, nil
	}
	_ = f.Close()
	r, done, err := archiveOfFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return &Source{Reader: r, close: done}, nil
}

// Restore imports src into ws, whose store must be empty, and verifies
// the result: a store that does not verify is a *NotVerifiedError.
func Restore(ctx context.Context, ws *workspace.Workspace, src io.Reader, opts RestoreOptions) (RestoreReport, error) {
	var r RestoreReport
	var err error
	if r.Import, err = ws.Import(ctx, src, workspace.ArchiveOptions{WithSealed: opts.WithTokens}); err != nil {
		return r, err
	}
	if r.Verified, err = ws.Verify(ctx); err != nil {
		return r, err
	}
	if !r.Verified.OK() {
		return r, &NotVerifiedError{What: "restore", Problems: r.Verified.Problems}
	}
	return r, nil
}

// isSQLiteFile reports whether f starts with SQLite's file header (and
// rewinds it).
func isSQLiteFile(f *os.File) bool {
	var head [16]byte
	n, _ := io.ReadFull(f, head[:])
	_, err := f.Seek(0, io.SeekStart)
	return err == nil && n == len(head) && string(head[:]) == "SQLite format 3\x00"
}

// archiveOfFile opens a scratch copy of the SQLite backup at path and
// returns a reader of its archive, written as it is read; done closes the
// store and removes the copy. The export's error, if any, reaches the
// reader (and so the import).
func archiveOfFile(ctx context.Context, path string) (io.Reader, func(), error) {
	scratch, err := os.MkdirTemp("", "agentspace-restore-*")
	if err != nil {
		return nil, nil, err
	}
	cp := filepath.Join(scratch, "ws.db")
	if err := copyFile(path, cp); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, nil, err
	}
	ws, err := workspace.Open(ctx, "sqlite:"+cp, workspace.Options{MustExist: true})
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, nil, &openError{path: path, err: err}
	}
	pr, pw := io.Pipe()
	exported := make(chan struct{})
	go func() {
		defer close(exported)
		_, err := ws.Export(ctx, pw, workspace.ArchiveOptions{})
		pw.CloseWithError(err)
	}()
	done := func() {
		_ = pr.Close() // an import that stopped early ends the export
		<-exported
		_ = ws.Close()
		_ = os.RemoveAll(scratch)
	}
	return pr, done, nil
}

// openError is a SQLite backup that would not open as a store.
type openError struct {
	path string
	err  error
}

func (e *openError) Error() string { return "restore " + e.path + ": " + e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// copyFile copies the file at from to a new file to.
func copyFile(from, to string) error {
	in, err := os.Open(from) // #nosec G304 -- the backup the caller named
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- a file in our own scratch directory
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
