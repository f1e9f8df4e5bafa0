-- The event log's hash chain (see workspace/driver/chain.go): each event's
-- hash, computed with sha256() in the statement that assigns its seq; the
-- head's hash, which the next append chains from; and the hash the event
-- at the floor chains from (that of the last event compacted away).
-- Events written before this migration keep a NULL hash: the chain starts
-- at the first event written after it, from 32 zero bytes.
ALTER TABLE events ADD COLUMN hash bytea;
ALTER TABLE counters
    ADD COLUMN hash       bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000',
    ADD COLUMN floor_hash bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000';
