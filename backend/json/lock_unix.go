//go:build unix

package jsonstore

import (
	"os"
	"syscall"
)

// flock takes (or converts to) a shared or exclusive lock on f's open file
// description. The kernel drops it when the process dies, so a crashed
// writer never leaves a stale lock behind.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// funlock releases f's lock.
func funlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// fileID identifies a file's inode, to notice a replaced event log.
func fileID(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
