-- Chain the events written before the chain (see workspace/driver/chain.go).
-- Migration 4 left them with a NULL hash; the hashes are computed in Go
-- right after this step, in batches of one transaction each
-- (backend/postgres/chainup.go). counters.chain_next is the first event
-- still to chain, 0 when none is: every event below it is chained from the
-- floor, and it moves (with counters.hash, the hash appends chain from) in
-- the transaction that writes the hashes it passes, so a run cut short
-- resumes where it stopped. A store is opened only once chain_next is 0,
-- so nothing is appended to a half-chained log.
-- Only a log whose newest event has no hash is chained, from floor_hash
-- (zeros): a log that already has chained events was written on schema 4
-- or 5 and keeps its older events as unchained.
ALTER TABLE counters ADD COLUMN chain_next bigint NOT NULL DEFAULT 0;
UPDATE counters SET chain_next = coalesce((SELECT seq FROM events ORDER BY seq LIMIT 1), 0)
WHERE (SELECT hash FROM events ORDER BY seq DESC LIMIT 1) IS NULL;
