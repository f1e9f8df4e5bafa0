package jsonstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system holding f to disk (syncfs(2)): one
// call makes every file a checkpoint covers durable, whichever process
// wrote it.
func syncFS(f *os.File) (bool, error) {
	for {
		err := unix.Syncfs(int(f.Fd())) // #nosec G115 -- a file descriptor fits in an int
		if err == unix.EINTR {
			continue
		}
		return true, err
	}
}
