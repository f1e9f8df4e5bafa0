-- Indexes for the event log's filters (Events.Read, Subscribe): each one
-- walks a filter's matches in seq order, so a filtered page stops early.
CREATE INDEX events_type ON events (type, seq);
CREATE INDEX events_actor ON events (actor, seq);
CREATE INDEX events_subject ON events (subject_id, seq);
CREATE INDEX events_subject_name ON events (subject_name, seq);
