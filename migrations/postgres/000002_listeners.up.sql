-- The stores that listen for the workspace's notifications, so that a
-- writer notifies only when another store listens (a NOTIFY costs every
-- commit a server-wide lock and wakes every listener in the database).
-- A store registers, refreshes and is judged live under the writers'
-- advisory lock, by the database's clock; a row whose store died expires.
CREATE TABLE listeners (
    store      text COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
