ALTER TABLE counters DROP COLUMN floor_hash, DROP COLUMN hash;
ALTER TABLE events DROP COLUMN hash;
