package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// rawFile is the json backend's baseline: plain files in a directory next
// to the store. A write is what the issue names: an atomic replace of each
// file (temp, fsync, rename, fsync of the directory) and one fsynced append
// to a log, under one in-process mutex (writers of one store take turns).
type rawFile struct {
	dir string
	mu  sync.Mutex
	log *os.File
}

func openRawFile(target, prefix string) (rawStore, error) {
	dir := filepath.Clean(target) + "." + prefix + ".raw"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raw json baseline: %w", err)
	}
	log, err := os.OpenFile(filepath.Join(dir, "events.ndjson"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600) // #nosec G304 -- a file in the benchmark's own directory
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("raw json baseline: %w", err)
	}
	return &rawFile{dir: dir, log: log}, nil
}

func (f *rawFile) close() {
	_ = f.log.Close()
	_ = os.RemoveAll(f.dir)
}

func (f *rawFile) walSyncs(context.Context) (int64, bool) { return 0, false }

type rawWrite struct {
	name string
	data []byte
}

// commit replaces each file atomically, then appends line to the log.
func (f *rawFile) commit(files []rawWrite, line []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range files {
		path := filepath.Join(f.dir, w.name)
		tmp, err := os.CreateTemp(f.dir, ".tmp-*")
		if err != nil {
			return err
		}
		if _, err := tmp.Write(w.data); err != nil {
			_ = tmp.Close()
			return err
		}
		if err := tmp.Sync(); err != nil {
			_ = tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return err
		}
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	_ = d.Close()
	if err != nil {
		return err
	}
	if _, err := f.log.Write(line); err != nil {
		return err
	}
	return f.log.Sync()
}

func (f *rawFile) op(ctx context.Context, s spec) (op, func(), error) {
	nothing := func() {}
	name := func(tag string, w int) string {
		return fmt.Sprintf("%s-%s-c%d-%d", tag, s.workload, s.c, w)
	}
	meta := []byte(`{"name":"x","version":2,"kind":"output","sha256":"0000000000000000000000000000000000000000000000000000000000000000"}`)
	line := []byte(`{"seq":1,"type":"artifact.updated","actor":"bench","subject":{"kind":"artifact","name":"x"},"version":2}` + "\n")
	body := make([]byte, 1024)
	switch s.workload {
	case "W1":
		return plain(func(ctx context.Context, w int) error {
			return f.commit([]rawWrite{{name("art", w), body}}, line)
		}), nothing, nil
	case "W2":
		for w := range s.c {
			if err := f.commit([]rawWrite{{name("art", w), body}, {name("meta", w), meta}}, line); err != nil {
				return nil, nil, err
			}
		}
		return plain(func(ctx context.Context, w int) error {
			if _, err := os.ReadFile(filepath.Join(f.dir, name("meta", w))); err != nil {
				return err
			}
			_, err := os.ReadFile(filepath.Join(f.dir, name("art", w)))
			return err
		}), nothing, nil
	case "W4", "W5":
		if s.variant != "" {
			return nil, nothing, nil
		}
		return plain(func(ctx context.Context, w int) error {
			if err := f.commit([]rawWrite{{name("rec", w), meta}}, line); err != nil {
				return err
			}
			return f.commit([]rawWrite{{name("rec", w), meta}}, line)
		}), nothing, nil
	case "W7":
		lines := append(append(append([]byte{}, line...), line...), line...)
		return plain(func(ctx context.Context, w int) error {
			return f.commit([]rawWrite{{name("art", w), body}, {name("note-a", w), meta}, {name("note-b", w), meta}}, lines)
		}), nothing, nil
	}
	return nil, nothing, nil
}
