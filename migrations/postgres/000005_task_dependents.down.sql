DROP INDEX IF EXISTS tasks_depends_on;
