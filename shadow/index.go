package shadow

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
)

// A shadow keeps its base manifest (base.bin) and its stat cache
// (stat.bin) in a compact binary form rather than JSON: decoding 20,000
// JSON entries took longer than walking the tree. Both files are
//
//	magic, uvarint count, count records, CRC-32C of everything before it
//
// with a record of the manifest being
//
//	path (uvarint length, bytes), mode (uvarint), size (varint),
//	SHA-256 (a length byte, 32 or 0 when deferred, then raw bytes),
//	link target (uvarint length, bytes)
//
// and a record of the stat cache being a statKey (inode, size, ctime ns,
// mtime ns as varints, mode as uvarint) followed by a manifest record.
// Decoding makes one string of all paths and one of all hex hashes, and
// slices them, so a 20,000-entry manifest is a few allocations, not 60,000.
// The checksum makes a torn or damaged file an error, never a wrong base
// (files are written by writeAtomic: synced, then renamed into place).

const (
	manifestMagic = "agentspace-manifest-1\n"
	cacheMagic    = "agentspace-statcache-1\n"
)

var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// errCorrupt is returned for an index file that does not decode.
var errCorrupt = errors.New("corrupt index file")

func appendEntry(b []byte, p string, e Entry) ([]byte, error) {
	var h []byte
	if e.Hash != "" { // else deferred (Open's clones): no hash yet
		var err error
		h, err = hex.DecodeString(e.Hash)
		if err != nil || len(h) != 32 {
			return nil, fmt.Errorf("%s: entry hash %q is not a hex SHA-256", p, e.Hash)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(p)))
	b = append(b, p...)
	b = binary.AppendUvarint(b, uint64(e.Mode))
	b = binary.AppendVarint(b, e.Size)
	b = append(b, byte(len(h)))
	b = append(b, h...)
	b = binary.AppendUvarint(b, uint64(len(e.Link)))
	return append(b, e.Link...), nil
}

func seal(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli()))
}

// encodeManifest returns m in the binary form above.
func encodeManifest(m Manifest) ([]byte, error) {
	b := make([]byte, 0, len(manifestMagic)+len(m)*96)
	b = append(b, manifestMagic...)
	b = binary.AppendUvarint(b, uint64(len(m)))
	var err error
	for p, e := range m {
		if b, err = appendEntry(b, p, e); err != nil {
			return nil, err
		}
	}
	return seal(b), nil
}

// encodeCache returns c in the binary form above.
func encodeCache(c statCache) ([]byte, error) {
	b := make([]byte, 0, len(cacheMagic)+len(c)*128)
	b = append(b, cacheMagic...)
	b = binary.AppendUvarint(b, uint64(len(c)))
	var err error
	for p, ce := range c {
		b = binary.AppendUvarint(b, ce.Key.Ino)
		b = binary.AppendVarint(b, ce.Key.Size)
		b = binary.AppendVarint(b, ce.Key.Ctime)
		b = binary.AppendVarint(b, ce.Key.Mtime)
		b = binary.AppendUvarint(b, uint64(ce.Key.Mode))
		if b, err = appendEntry(b, p, ce.Entry); err != nil {
			return nil, err
		}
	}
	return seal(b), nil
}

// reader decodes the binary form; the first error sticks.
type reader struct {
	b      []byte
	err    error
	paths  []byte // every path and link target, later one string
	hashes []byte // every hash in hex, later one string
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

// uint32 is uvarint for a value that must fit 32 bits.
func (r *reader) uint32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.err = errCorrupt
		return 0
	}
	return uint32(v) // #nosec G115 -- checked just above
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next n bytes.
func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// span is a string still to be cut from the reader's paths or hashes.
type span struct{ from, to int }

// rawEntry is an entry whose strings are spans, until all are read.
type rawEntry struct {
	path, link, hash span
	mode             fs.FileMode
	size             int64
}

func (r *reader) entry() rawEntry {
	var e rawEntry
	p := r.bytes(r.uvarint())
	e.path = span{len(r.paths), len(r.paths) + len(p)}
	r.paths = append(r.paths, p...)
	e.mode = fs.FileMode(r.uint32())
	e.size = r.varint()
	var h []byte
	switch n := r.bytes(1); {
	case len(n) == 1 && (n[0] == 0 || n[0] == 32):
		h = r.bytes(uint64(n[0]))
	default:
		r.err = errCorrupt
	}
	e.hash = span{len(r.hashes), len(r.hashes) + 2*len(h)}
	r.hashes = hex.AppendEncode(r.hashes, h)
	l := r.bytes(r.uvarint())
	e.link = span{len(r.paths), len(r.paths) + len(l)}
	r.paths = append(r.paths, l...)
	return e
}

// open checks the magic and checksum of b and returns the record count.
func open(b []byte, magic string) (*reader, int, error) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, 0, errCorrupt
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli()) != sum {
		return nil, 0, errCorrupt
	}
	r := &reader{b: body[len(magic):]}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) { // a record is at least one byte
		return nil, 0, errCorrupt
	}
	r.paths = make([]byte, 0, len(r.b))
	count := int(n) // #nosec G115 -- n <= len(r.b), an int
	r.hashes = make([]byte, 0, count*64)
	return r, count, nil
}

// strings returns the cut functions for the reader's paths and hashes.
func (r *reader) strings() (func(span) string, func(span) string) {
	ps, hs := string(r.paths), string(r.hashes)
	return func(s span) string { return ps[s.from:s.to] }, func(s span) string { return hs[s.from:s.to] }
}

func (e rawEntry) entry(path, hash func(span) string) Entry {
	return Entry{Hash: hash(e.hash), Mode: e.mode, Size: e.size, Link: path(e.link)}
}

// decodeManifest reads what encodeManifest wrote.
func decodeManifest(b []byte) (Manifest, error) {
	r, n, err := open(b, manifestMagic)
	if err != nil {
		return nil, err
	}
	raw := make([]rawEntry, n)
	for i := range raw {
		raw[i] = r.entry()
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errCorrupt
	}
	path, hash := r.strings()
	m := make(Manifest, n)
	for _, e := range raw {
		m[path(e.path)] = e.entry(path, hash)
	}
	return m, nil
}

// decodeCache reads what encodeCache wrote.
func decodeCache(b []byte) (statCache, error) {
	r, n, err := open(b, cacheMagic)
	if err != nil {
		return nil, err
	}
	keys := make([]statKey, n)
	raw := make([]rawEntry, n)
	for i := range raw {
		keys[i] = statKey{Ino: r.uvarint(), Size: r.varint(), Ctime: r.varint(), Mtime: r.varint(), Mode: r.uint32()}
		raw[i] = r.entry()
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errCorrupt
	}
	path, hash := r.strings()
	c := make(statCache, n)
	for i, e := range raw {
		c[path(e.path)] = cachedEntry{Key: keys[i], Entry: e.entry(path, hash)}
	}
	return c, nil
}

// readBase reads a shadow's base manifest from home: base.bin, or the
// base.json of a shadow opened before the binary form.
func readBase(home string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(home, "base.bin")) // #nosec G304 -- home is a checked shadow's directory
	if err == nil {
		m, err := decodeManifest(b)
		if err != nil {
			return nil, fmt.Errorf("base.bin: %w", err)
		}
		return m, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b, err = os.ReadFile(filepath.Join(home, "base.json")) // #nosec G304 -- as above
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("base.json: %w", err)
	}
	return m, nil
}

// writeBase replaces home's base manifest (and drops a base.json left by
// an older version, so it is never read in its place).
func writeBase(home string, m Manifest) error {
	b, err := encodeManifest(m)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(home, "base.bin"), b); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(home, "base.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readCache reads the stat cache at path; a missing or bad one is empty
// (losing it only costs hashing again).
func readCache(path string) statCache {
	b, err := os.ReadFile(path) // #nosec G304 -- this package's own cache file
	if err != nil {
		return nil
	}
	c, err := decodeCache(b)
	if err != nil {
		return nil
	}
	return c
}

// writeCache replaces the stat cache at path, not synced: a cache lost or
// torn by a crash decodes as empty (its checksum) and costs one rehash.
func writeCache(path string, c statCache) {
	b, err := encodeCache(c)
	if err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".stat-*.tmp") // concurrent scans write their own
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
}
