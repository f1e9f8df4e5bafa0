-- The paths a task expects to touch (NewTask.Areas), as a JSON array; NULL
-- when none. Claim's AvoidOverlap reads them in the engine.
ALTER TABLE tasks ADD COLUMN areas TEXT;
