-- Retention removes a finished task only if no task depends on it: this
-- index finds a task's dependents (depends_on @> ARRAY[id]) without a scan.
CREATE INDEX tasks_depends_on ON tasks USING gin (depends_on);
