-- Chain the events written before the chain (see workspace/driver/chain.go).
-- Migration 6 left them with a NULL hash; the hashes are computed in Go
-- right after this step, in batches of one transaction each
-- (backend/sqlite/chainup.go). meta.chain_next is the first event still to
-- chain, 0 when none is: every event below it is chained from the floor,
-- and it moves in the transaction that writes the hashes it passes, so a
-- run cut short resumes where it stopped. A store is opened only once
-- chain_next is 0, so nothing is appended to a half-chained log.
-- Only a log whose newest event has no hash is chained, from floor_hash
-- (zeros): a log that already has chained events was written on schema 6
-- and keeps its older events as unchained.
ALTER TABLE meta ADD COLUMN chain_next INTEGER NOT NULL DEFAULT 0;
UPDATE meta SET chain_next = coalesce((SELECT seq FROM events ORDER BY seq LIMIT 1), 0)
WHERE id = 1 AND (SELECT hash FROM events ORDER BY seq DESC LIMIT 1) IS NULL;
