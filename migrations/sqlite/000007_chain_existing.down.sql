ALTER TABLE meta DROP COLUMN chain_next;
