package jsonstore

import (
	"errors"
	"slices"
	"testing"
)

// The decoders of every file in the tree must turn any input into a value
// or an error (a *CorruptError naming the file, for JSON), never a panic.
// Seeds are in testdata/fuzz; run one with
//
//	go test -run '^$' -fuzz FuzzParseEvents -fuzztime 30s ./backend/json

func FuzzParseEvents(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-01-02T03:04:05.000006Z","actor":"a","type":"note.put","subject":{"kind":"note","id":"d/k","name":"k"},"version":1}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, _, err := parseEvents(data, 1)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != eventsFile || ce.Line < 1 {
				t.Fatalf("error %v does not name the file and line", err)
			}
			return
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Seq <= evs[i-1].Seq {
				t.Fatalf("seqs not increasing: %d after %d", evs[i].Seq, evs[i-1].Seq)
			}
		}
	})
}

func FuzzDecodeJournal(f *testing.F) {
	rec := &record{Writes: []fileWrite{{Path: "tasks/x.json", Data: []byte("{}")}}, Removes: []string{"notes/a/b.json"},
		Appends: []fileAppend{{Path: "meta/versions/x.ndjson", At: 10, Data: []byte("{}\n")}},
		Mirror:  []mirrorOp{{Name: "a/b", Blob: "blobs/x/y"}}, Events: []eventJSON{{Seq: 1, Type: "t"}}, Floor: 2}
	b, err := encodeJournal(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// A write-ahead log: two entries, the first marked applied, the second torn.
	f.Add(append(append(append(slices.Clone(b), appliedMarker...), b...), b[:len(b)/2]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, end, err := decodeJournal(data)
		if end < 0 || end > len(data) || (err == nil && end != len(data)) {
			t.Fatalf("end %d of %d bytes (err %v)", end, len(data), err)
		}
		var again []byte
		for _, rec := range recs {
			for _, w := range rec.Writes {
				if !safeRelPath(w.Path) {
					t.Fatalf("unsafe path %q accepted", w.Path)
				}
			}
			for _, a := range rec.Appends {
				if !safeRelPath(a.Path) || a.At < 0 {
					t.Fatalf("unsafe append %q at %d accepted", a.Path, a.At)
				}
			}
			for _, m := range rec.Mirror {
				if !safeRelPath(m.Name) {
					t.Fatalf("unsafe mirror name %q accepted", m.Name)
				}
			}
			b, err := encodeJournal(rec)
			if err != nil {
				t.Fatal(err)
			}
			again = append(again, b...)
		}
		if back, _, err := decodeJournal(again); err != nil || len(back) != len(recs) {
			t.Fatalf("re-encoded entries do not decode: %d of %d, %v", len(back), len(recs), err)
		}
	})
}

// FuzzParseVersions feeds the decoder of meta/versions/ID.ndjson.
func FuzzParseVersions(f *testing.F) {
	f.Add([]byte(`{"version":1,"name":"a.md","kind":"doc","owner":"o","content_type":"text/plain","sha256":"","size":0,"created_at":"2026-01-02T03:04:05Z","created_by":"o","updated_at":"2026-01-02T03:04:05Z","updated_by":"o"}` + "\n" +
		`{"version":2,"name":"a.md","kind":"doc","owner":"o","content_type":"text/plain","sha256":"","size":0,"labels":{"k":"v"},"created_at":"2026-01-02T03:04:05Z","created_by":"o","updated_at":"2026-01-02T03:04:06Z","updated_by":"p"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "meta/versions/x.ndjson"
		vs, err := parseVersions(file, "x", data, 1)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != file || ce.Line < 1 {
				t.Fatalf("error %v does not name the file and line", err)
			}
			return
		}
		for i, a := range vs {
			if a.Version != int64(i+1) {
				t.Fatalf("version %d at position %d", a.Version, i+1)
			}
		}
		again, err := encodeVersions(vs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseVersions(file, "x", again, 1); err != nil {
			t.Fatalf("re-encoded versions do not decode: %v", err)
		}
	})
}

// FuzzDecodeRecord feeds the record decoders; the first byte picks one.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`a{"id":"0190","name":"a.md","head":{"version":2,"name":"a.md","kind":"doc","owner":"o","content_type":"text/plain","sha256":"","size":0,"created_at":"2026-01-02T03:04:05Z","created_by":"o","updated_at":"2026-01-02T03:04:05Z","updated_by":"o"}}`))
	f.Add([]byte(`t{"id":"0190","title":"t","status":"pending","priority":0,"attempts":0,"version":1,"created_at":"2026-01-02T03:04:05Z","created_by":"o","updated_at":"2026-01-02T03:04:05Z","updated_by":"o"}`))
	f.Add([]byte(`n{"kind":"decision","key":"k","author":"a","version":1,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","updated_by":"a"}`))
	f.Add([]byte(`l{"resource":"file:x","owner":"a","token":3,"expires_at":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte("f1 dirty\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		sel, body := data[0], data[1:]
		var err error
		switch sel % 5 {
		case 0:
			var r *artRec
			r, err = decodeArtifact("meta/artifacts/x.json", body)
			if err == nil {
				_ = r.head() // at least one version
				if _, err := encodeArtifact(r); err != nil {
					t.Fatal(err)
				}
			}
		case 1:
			_, err = decodeTask("tasks/x.json", body)
		case 2:
			_, err = decodeNote("notes/k/x.json", body)
		case 3:
			_, err = decodeLease("leases/x.json", body)
		case 4:
			_, _, err = parseFormat(body)
		}
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File == "" {
				t.Fatalf("error %v does not name the file", err)
			}
		}
	})
}

func TestDecodeJournalHugeLengthIsTorn(t *testing.T) {
	_, _, err := decodeJournal([]byte("agentspace-journal 1 9223372036854775807 00000000\n{}\n"))
	if !errors.Is(err, errTorn) {
		t.Fatalf("want a torn entry, got %v", err)
	}
}
