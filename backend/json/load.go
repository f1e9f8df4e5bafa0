package jsonstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// refresh brings the state up to date with other handles' commits: the
// records named by the events they appended are read again. A replaced or
// shrunk log (a compaction) reloads everything.
func (s *store) refresh() error {
	if s.st == nil {
		return s.load()
	}
	fi, err := s.root.Stat(eventsFile)
	if errors.Is(err, fs.ErrNotExist) {
		if s.logID != (logIdent{}) {
			return s.load()
		}
		return nil
	}
	if err != nil {
		return err
	}
	id := logIdent{ino: fileID(fi), size: fi.Size(), mtime: fi.ModTime()}
	if id == s.logID {
		return nil
	}
	if id.ino != s.logID.ino || id.size < s.logID.size {
		return s.load()
	}
	f, err := s.root.Open(eventsFile)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, s.logID.size, id.size-s.logID.size))
	if err != nil {
		return err
	}
	evs, hashes, err := parseEvents(data, s.logLines+1)
	if err != nil {
		return err
	}
	// A gc removes versions and tasks under one event about the
	// workspace, naming none of them, and a message's or a pause's event
	// stands for the engine's several records of it (its index entries):
	// reload everything after one.
	if len(evs) > 0 && evs[0].Seq <= s.st.head() ||
		slices.ContainsFunc(evs, func(ev workspace.Event) bool {
			return ev.Type == workspace.EventGC || ev.Subject.Kind == workspace.SubjectMessage || ev.Subject.Kind == workspace.SubjectActor
		}) {
		return s.load()
	}
	for _, ev := range evs {
		if err := s.reloadSubject(ev.Subject); err != nil {
			return err
		}
	}
	s.st.appendEvents(evs, hashes)
	if len(evs) > 0 {
		s.diskLast = evs[len(evs)-1].Seq
	}
	s.logID = id
	s.logLines += len(evs)
	return nil
}

// readRecord reads a record file: (nil, nil) if it does not exist.
func (s *store) readRecord(name string) ([]byte, error) {
	data, err := s.root.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// reloadSubject reads the record an event is about again.
func (s *store) reloadSubject(subj workspace.Subject) error {
	switch subj.Kind {
	case workspace.SubjectArtifact:
		if !idRE().MatchString(subj.ID) {
			return corrupt(eventsFile, "artifact id %q", subj.ID)
		}
		return s.reloadArtifact(subj.ID)
	case workspace.SubjectTask:
		if !idRE().MatchString(subj.ID) {
			return corrupt(eventsFile, "task id %q", subj.ID)
		}
		data, err := s.readRecord(taskPath(subj.ID))
		if err != nil || data == nil {
			return err
		}
		t, err := decodeTask(taskPath(subj.ID), data)
		if err != nil {
			return err
		}
		s.st.setTask(t)
	case workspace.SubjectNote:
		kind, key, ok := strings.Cut(subj.ID, "/")
		if !ok || !kindRE().MatchString(kind) {
			return corrupt(eventsFile, "note id %q", subj.ID)
		}
		k := noteKey{kind, key}
		data, err := s.readRecord(notePath(k))
		if err != nil {
			return err
		}
		if data == nil {
			s.st.setNote(k, nil)
			return nil
		}
		n, err := decodeNote(notePath(k), data)
		if err != nil {
			return err
		}
		s.st.setNote(k, &n)
	case workspace.SubjectLock:
		data, err := s.readRecord(leasePath(subj.ID))
		if err != nil {
			return err
		}
		if data == nil {
			s.st.setLease(subj.ID, nil)
			return nil
		}
		l, err := decodeLease(leasePath(subj.ID), data)
		if err != nil {
			return err
		}
		s.st.setLease(l.Resource, &l)
	}
	return nil
}

// reloadArtifact reads artifact id's head file again and what was
// appended to its versions file since this handle last read it (all of it
// if the file was replaced or never read).
func (s *store) reloadArtifact(id string) error {
	hroot, hrel := s.sub(artifactPath(id))
	data, err := hroot.ReadFile(hrel)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", artifactPath(id), err)
	}
	if data == nil {
		s.st.setArt(id, nil)
		delete(s.vfiles, id)
		return nil
	}
	r, err := decodeArtifact(artifactPath(id), data)
	if err != nil {
		return err
	}
	p := versionsPath(id)
	vroot, vrel := s.sub(p)
	f, err := vroot.Open(vrel)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	cur := fileIdent{ino: fileID(fi), size: fi.Size()}
	var vs []workspace.Artifact
	old, seen := s.st.arts[id], s.vfiles[id]
	if old != nil && seen.size > 0 && seen.ino == cur.ino && seen.size <= cur.size {
		tail, err := io.ReadAll(io.NewSectionReader(f, seen.size, cur.size-seen.size))
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		added, err := parseVersions(p, id, tail, len(old.versions)+1)
		if err != nil {
			return err
		}
		vs = append(slices.Clip(old.versions), added...)
	} else {
		all, err := io.ReadAll(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		cur.size = int64(len(all))
		if vs, err = parseVersions(p, id, all, 1); err != nil {
			return err
		}
	}
	if r, err = withVersions(p, r, vs); err != nil {
		return err
	}
	s.st.setArt(id, r)
	s.vfiles[id] = cur
	return nil
}

// noteVersions records the versions files of the artifacts a commit of
// this handle changed, as they are now on disk (the state holds them).
func (s *store) noteVersions(ids map[string]*artRec) {
	for id := range ids {
		vroot, vrel := s.sub(versionsPath(id))
		fi, err := vroot.Stat(vrel)
		if err != nil {
			delete(s.vfiles, id)
			continue
		}
		s.vfiles[id] = fileIdent{ino: fileID(fi), size: fi.Size()}
	}
}

// readDir lists dir's entries, skipping temporary files.
func (s *store) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := s.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, linkOr(s.root, dir, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", dir, err)
	}
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return strings.HasPrefix(e.Name(), tmpPrefix) }), nil
}

// eachFile calls fn with every regular file of dir (temporary files
// aside), read through a root on dir so each read is one open.
func (s *store) eachFile(dir string, fn func(name string, data []byte) error) error {
	ents, err := s.readDir(dir)
	if err != nil || len(ents) == 0 {
		return err
	}
	r, err := s.root.OpenRoot(dir)
	if err != nil {
		return linkOr(s.root, dir, err)
	}
	defer r.Close()
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := r.ReadFile(e.Name())
		if err != nil {
			return fmt.Errorf("read %s: %w", path.Join(dir, e.Name()), err)
		}
		if err := fn(path.Join(dir, e.Name()), data); err != nil {
			return err
		}
	}
	return nil
}

// load reads the whole tree into a new state.
func (s *store) load() error {
	st := newState()
	vfiles := map[string]fileIdent{}
	vroot, err := s.root.OpenRoot(versionsDir)
	if err != nil {
		return linkOr(s.root, versionsDir, err)
	}
	defer vroot.Close()
	err = s.eachFile(metaDir, func(name string, data []byte) error {
		r, err := decodeArtifact(name, data)
		if err != nil {
			return err
		}
		if path.Base(name) != r.id+jsonSuffix {
			return corrupt(name, "holds artifact %s", r.id)
		}
		p := versionsPath(r.id)
		f, err := vroot.Open(r.id + ndjsonSuffix)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		vdata, err := io.ReadAll(f)
		var fi fs.FileInfo
		if err == nil {
			fi, err = f.Stat()
		}
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		vs, err := parseVersions(p, r.id, vdata, 1)
		if err != nil {
			return err
		}
		if r, err = withVersions(p, r, vs); err != nil {
			return err
		}
		vfiles[r.id] = fileIdent{ino: fileID(fi), size: int64(len(vdata))}
		st.arts[r.id] = r
		if n, ok := st.liveName(r); ok {
			if other, dup := st.byName[n]; dup {
				return corrupt(name, "live name %q is also artifact %s's", n, other)
			}
			st.byName[n] = r.id
			st.folded[fold(n)] = r.id
			st.names = append(st.names, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(st.names)
	err = s.eachFile(tasksDir, func(name string, data []byte) error {
		t, err := decodeTask(name, data)
		if err != nil {
			return err
		}
		st.tasks[t.ID] = t
		st.taskIDs = append(st.taskIDs, t.ID)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(st.taskIDs)
	st.indexTasks()
	kinds, err := s.readDir(notesDir)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if !k.IsDir() {
			continue
		}
		err := s.eachFile(path.Join(notesDir, k.Name()), func(name string, data []byte) error {
			n, err := decodeNote(name, data)
			if err != nil {
				return err
			}
			st.notes[noteKey{n.Kind, n.Key}] = n
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = s.eachFile(leasesDir, func(name string, data []byte) error {
		l, err := decodeLease(name, data)
		if err != nil {
			return err
		}
		st.leases[l.Resource] = l
		return nil
	})
	if err != nil {
		return err
	}
	if data, err := s.readRecord(floorFile); err != nil {
		return err
	} else if data != nil {
		var fj floorJSON
		if err := decodeJSON(floorFile, 1, data, &fj); err != nil {
			return err
		}
		if fj.Floor < 1 {
			return corrupt(floorFile, "floor %d is below 1", fj.Floor)
		}
		st.floor = fj.Floor
		if st.floorHash, err = decodeHash(fj.Hash); err != nil {
			return &CorruptError{File: floorFile, Line: 1, Err: err}
		}
	}
	f, err := s.root.Open(eventsFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var id logIdent
	if f != nil {
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		id = logIdent{ino: fileID(fi), size: int64(len(data)), mtime: fi.ModTime()}
		if id.size != fi.Size() {
			id.mtime = time.Time{} // changed while read: look again next time
		}
		if st.events, st.hashes, err = parseEvents(data, 1); err != nil {
			return err
		}
		if n := len(st.events); n > 0 && st.events[0].Seq < st.floor {
			return corrupt(eventsFile, "seq %d is below the floor %d of %s", st.events[0].Seq, st.floor, floorFile)
		}
	}
	s.st, s.logID, s.logLines, s.vfiles = st, id, len(st.events), vfiles
	s.diskLast = st.head()
	if n := len(st.events); n == 0 {
		s.diskLast = 0
	}
	return nil
}

// parseEvents decodes NDJSON event lines; first is data's first line
// number. Every line must be complete and seqs must increase.
func parseEvents(data []byte, first int) ([]workspace.Event, [][]byte, error) {
	var (
		out    []workspace.Event
		hashes [][]byte
	)
	n := first - 1
	for line := range bytes.Lines(data) {
		n++
		if line[len(line)-1] != '\n' {
			return nil, nil, &CorruptError{File: eventsFile, Line: n, Err: errors.New("incomplete last line")}
		}
		ev, hash, err := decodeChainedLine(eventsFile, n, line)
		if err != nil {
			return nil, nil, err
		}
		if k := len(out); k > 0 && ev.Seq <= out[k-1].Seq {
			return nil, nil, &CorruptError{File: eventsFile, Line: n, Err: fmt.Errorf("seq %d after seq %d", ev.Seq, out[k-1].Seq)}
		}
		out = append(out, ev)
		hashes = append(hashes, hash)
	}
	return out, hashes, nil
}
