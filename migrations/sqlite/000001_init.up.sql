-- The agentspace schema for SQLite. Times are INTEGER microseconds since the
-- Unix epoch, UTC; NULL for "not set". Labels, results and dependency lists
-- are JSON text.

-- One row: the event log's floor (the lowest seq not compacted away).
CREATE TABLE meta (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    floor INTEGER NOT NULL DEFAULT 1
);
INSERT INTO meta (id, floor) VALUES (1, 1);

-- Artifact heads: which version is current, and the fields List filters on.
CREATE TABLE artifacts (
    id      TEXT PRIMARY KEY,
    name    TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    owner   TEXT NOT NULL,
    task_id TEXT NOT NULL DEFAULT '',
    deleted INTEGER NOT NULL DEFAULT 0
);
-- A name is unique among live artifacts; a deleted one frees it.
CREATE UNIQUE INDEX artifacts_live_name ON artifacts (name) WHERE deleted = 0;
CREATE INDEX artifacts_live_kind ON artifacts (kind, name) WHERE deleted = 0;
CREATE INDEX artifacts_live_owner ON artifacts (owner, name) WHERE deleted = 0;
CREATE INDEX artifacts_live_task ON artifacts (task_id, name) WHERE deleted = 0 AND task_id <> '';

-- Every version's metadata; history is never rewritten.
CREATE TABLE artifact_versions (
    artifact_id  TEXT NOT NULL REFERENCES artifacts (id),
    version      INTEGER NOT NULL,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    owner        TEXT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    size         INTEGER NOT NULL,
    labels       TEXT,
    task_id      TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    created_by   TEXT NOT NULL,
    updated_at   INTEGER NOT NULL,
    updated_by   TEXT NOT NULL,
    PRIMARY KEY (artifact_id, version)
) WITHOUT ROWID;

-- Content, stored once per (artifact, hash).
CREATE TABLE blobs (
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    sha256      TEXT NOT NULL,
    content     BLOB,
    PRIMARY KEY (artifact_id, sha256)
);

CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    title            TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    assignee         TEXT NOT NULL DEFAULT '',
    parent_id        TEXT NOT NULL DEFAULT '',
    depends_on       TEXT,
    priority         INTEGER NOT NULL DEFAULT 0,
    labels           TEXT,
    result           TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    version          INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    created_by       TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,
    updated_by       TEXT NOT NULL
) WITHOUT ROWID;
-- Claim walks pending tasks in claim order (highest priority, then oldest
-- id) and stops at the first ready one: no sort.
CREATE INDEX tasks_ready ON tasks (status, priority DESC, id);
CREATE INDEX tasks_status ON tasks (status, id);
CREATE INDEX tasks_assignee ON tasks (assignee, id) WHERE assignee <> '';
CREATE INDEX tasks_parent ON tasks (parent_id, id) WHERE parent_id <> '';
CREATE INDEX tasks_claim_expiry ON tasks (status, lease_expires_at);

-- The dependency edges of tasks.depends_on, for the readiness query.
CREATE TABLE task_deps (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    dep_id  TEXT NOT NULL REFERENCES tasks (id),
    PRIMARY KEY (task_id, dep_id)
) WITHOUT ROWID;
CREATE INDEX task_deps_dep ON task_deps (dep_id);

CREATE TABLE notes (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    title      TEXT NOT NULL DEFAULT '',
    body       TEXT NOT NULL DEFAULT '',
    author     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;

-- Lease rows are kept after release (owner '') so tokens keep increasing.
CREATE TABLE leases (
    resource    TEXT PRIMARY KEY,
    owner       TEXT NOT NULL DEFAULT '',
    token       INTEGER NOT NULL,
    acquired_at INTEGER,
    expires_at  INTEGER
) WITHOUT ROWID;

CREATE TABLE idempotency (
    key        TEXT PRIMARY KEY,
    result     BLOB NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX idempotency_expiry ON idempotency (expires_at);

-- The event log: seq is the rowid, so MAX(seq) and seq ranges are index lookups.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY,
    time         INTEGER NOT NULL,
    actor        TEXT NOT NULL,
    type         TEXT NOT NULL,
    subject_kind TEXT NOT NULL DEFAULT '',
    subject_id   TEXT NOT NULL DEFAULT '',
    subject_name TEXT NOT NULL DEFAULT '',
    version      INTEGER NOT NULL DEFAULT 0,
    message      TEXT NOT NULL DEFAULT ''
);
