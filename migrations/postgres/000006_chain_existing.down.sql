ALTER TABLE counters DROP COLUMN chain_next;
