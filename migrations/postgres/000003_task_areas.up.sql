-- The paths a task expects to touch (NewTask.Areas), in the order given.
-- Claim's AvoidOverlap reads them in the engine.
ALTER TABLE tasks ADD COLUMN areas text[] COLLATE "C" NOT NULL DEFAULT '{}';
