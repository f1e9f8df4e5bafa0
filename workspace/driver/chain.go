package driver

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/agentspace/agentspace/workspace"
)

// The event log is a hash chain: each event's hash covers the hash of the
// event before it, so an event edited, removed or reordered behind the
// library's back breaks every link from it on. The canonical encoding:
//
//	hash(n) = SHA-256( hash(n-1) || be64(seq) || body )
//	body    = be64(time in µs since the Unix epoch, UTC) || str(actor) || str(type)
//	          || str(subject kind) || str(subject id) || str(subject name)
//	          || be64(version) || str(message)
//	str(s)  = be32(len(s)) || the bytes of s (UTF-8)
//
// be64 and be32 are big-endian two's complement integers. hash(n-1) of the
// first event ever written is 32 zero bytes. A store writes the hash of
// each event in the transaction that assigns its seq, in commit order;
// compaction keeps the hash of the last event it removes (the chain base)
// so that the log still verifies from its floor.

// ChainHashSize is the length of an event hash in bytes.
const ChainHashSize = sha256.Size

// ZeroChainHash is the hash the first event ever written chains from.
var ZeroChainHash = make([]byte, ChainHashSize)

// ChainBody is the canonical encoding of an event without its seq (see
// the chain's description above). Postgres hashes it together with the
// seq it assigns inside the statement that assigns it.
func ChainBody(e workspace.Event) []byte {
	n := 8 + 8 + 4*6 + len(e.Actor) + len(e.Type) + len(e.Subject.Kind) + len(e.Subject.ID) + len(e.Subject.Name) + len(e.Message)
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time.UnixMicro())) // #nosec G115 -- two's complement is the documented encoding
	for _, s := range []string{e.Actor, e.Type, e.Subject.Kind, e.Subject.ID, e.Subject.Name} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s))) // #nosec G115 -- strings are bounded far below 4 GiB by validation
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(e.Version))      // #nosec G115 -- two's complement is the documented encoding
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Message))) // #nosec G115 -- bounded by validation
	return append(b, e.Message...)
}

// ChainLink returns the hash of the event numbered seq, whose canonical
// body is body, chained from prev.
func ChainLink(prev []byte, seq int64, body []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], uint64(seq)) // #nosec G115 -- seqs are positive
	h.Write(s[:])
	h.Write(body)
	return h.Sum(nil)
}

// ChainHash returns the hash of event e (its Seq set) chained from prev.
func ChainHash(prev []byte, e workspace.Event) []byte {
	return ChainLink(prev, e.Seq, ChainBody(e))
}

// ChainHashes returns the hashes of events, in order, the first chained
// from prev. Every event's Seq must be set.
func ChainHashes(prev []byte, events []workspace.Event) [][]byte {
	out := make([][]byte, len(events))
	for i, e := range events {
		prev = ChainHash(prev, e)
		out[i] = prev
	}
	return out
}

// ChainedEvent is an event as ReadTx.ChainEvents returns it: with its
// stored hash, nil for an event written before the store kept the chain.
type ChainedEvent struct {
	Event workspace.Event
	Hash  []byte
}
