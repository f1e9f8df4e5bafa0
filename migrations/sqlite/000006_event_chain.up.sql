-- The event log's hash chain (see workspace/driver/chain.go): each event's
-- hash, written in the transaction that assigns its seq, and the hash the
-- event at the floor chains from (that of the last event compacted away).
-- Events written before this migration keep a NULL hash: the chain starts
-- at the first event written after it, from 32 zero bytes.
ALTER TABLE events ADD COLUMN hash BLOB;
ALTER TABLE meta ADD COLUMN floor_hash BLOB NOT NULL DEFAULT x'0000000000000000000000000000000000000000000000000000000000000000';
