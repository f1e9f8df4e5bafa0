DROP INDEX events_subject_name;
DROP INDEX events_subject;
DROP INDEX events_actor;
DROP INDEX events_type;

CREATE INDEX events_type ON events (type, seq);
CREATE INDEX events_actor ON events (actor, seq);
CREATE INDEX events_subject ON events (subject_id, seq);
CREATE INDEX events_subject_name ON events (subject_name, seq);

ALTER TABLE meta DROP COLUMN indexed_to;
ALTER TABLE events DROP COLUMN indexed;
