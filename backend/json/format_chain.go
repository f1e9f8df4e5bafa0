package jsonstore

import (
	"bytes"
	"errors"
	"io/fs"

	"github.com/agentspace/agentspace/workspace/driver"
)

// Format 3 adds the event log's hash chain: a "hash" on each line of
// events.ndjson and in floor.json (see chain.go). Going up chains the
// events already there (from the floor, whose base is taken to be zeros);
// going down strips the hashes, which format 2 does not know.

func startChain(f *formatHandle) error {
	if err := f.replayJournal(); err != nil {
		return err
	}
	data, err := f.root.ReadFile(eventsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var out bytes.Buffer
	prev := driver.ZeroChainHash
	n := 0
	for line := range bytes.Lines(data) {
		n++
		ev, err := decodeEventLine(eventsFile, n, line)
		if err != nil {
			return err
		}
		prev = driver.ChainHash(prev, ev)
		b, err := encodeEventLine(ev, prev)
		if err != nil {
			return err
		}
		out.Write(b)
	}
	return replaceFile(f.root, eventsFile, out.Bytes(), dirSet{}, false)
}

func dropChain(f *formatHandle) error {
	if err := f.replayJournal(); err != nil {
		return err
	}
	dirs := dirSet{}
	data, err := f.root.ReadFile(eventsFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		var out bytes.Buffer
		n := 0
		for line := range bytes.Lines(data) {
			n++
			ev, err := decodeEventLine(eventsFile, n, line)
			if err != nil {
				return err
			}
			b, err := encodeEventLine(ev, nil)
			if err != nil {
				return err
			}
			out.Write(b)
		}
		if err := replaceFile(f.root, eventsFile, out.Bytes(), dirs, false); err != nil {
			return err
		}
	}
	fdata, err := f.root.ReadFile(floorFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var fj floorJSON
	if err := decodeJSON(floorFile, 1, fdata, &fj); err != nil {
		return err
	}
	fb, err := marshalFile(floorJSON{Floor: fj.Floor})
	if err != nil {
		return err
	}
	return replaceFile(f.root, floorFile, fb, dirs, false)
}
