//go:build !unix

package jsonstore

import (
	"errors"
	"os"
)

var errNoFlock = errors.New("json backend: file locks (flock) are only supported on unix systems")

func flock(f *os.File, exclusive bool) error { return errNoFlock }

func funlock(f *os.File) error { return errNoFlock }

func fileID(fi os.FileInfo) uint64 { return 0 }
