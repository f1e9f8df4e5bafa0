-- The event log's filter indexes are kept in batches. An event is written
-- with indexed = 0 and sits in the log's tail, which filtered reads scan in
-- seq order (the tail is short: fewer than ws_index_batch events); a writer
-- whose append brings the tail to that length marks the whole tail indexed
-- in the same transaction and moves meta.indexed_to past it. Indexing one
-- event at a time wrote a leaf page of each per-subject index to the WAL
-- for every event (most of a small write's pages); a batch writes each
-- touched leaf once. Postgres' GIN "pending list" makes the same trade.
--
-- Invariant: an event is indexed (indexed = 1) exactly when its seq is at
-- most meta.indexed_to.
ALTER TABLE events ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE meta ADD COLUMN indexed_to INTEGER NOT NULL DEFAULT 0;

DROP INDEX events_type;
DROP INDEX events_actor;
DROP INDEX events_subject;
DROP INDEX events_subject_name;

UPDATE events SET indexed = 1;
UPDATE meta SET indexed_to = coalesce((SELECT max(seq) FROM events), 0) WHERE id = 1;

CREATE INDEX events_type ON events (type, seq) WHERE indexed = 1;
CREATE INDEX events_actor ON events (actor, seq) WHERE indexed = 1;
CREATE INDEX events_subject ON events (subject_id, seq) WHERE indexed = 1;
CREATE INDEX events_subject_name ON events (subject_name, seq) WHERE indexed = 1;
