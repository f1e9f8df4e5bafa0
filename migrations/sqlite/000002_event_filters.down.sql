DROP INDEX events_subject_name;
DROP INDEX events_subject;
DROP INDEX events_actor;
DROP INDEX events_type;
