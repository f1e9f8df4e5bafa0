-- The workspace's tables. Every name, key and id column uses the "C"
-- collation so that ordering and cursors compare bytes, as Go does.

-- One row: the event log's head (the newest seq handed out) and floor.
CREATE TABLE counters (
    id    boolean PRIMARY KEY DEFAULT true CHECK (id),
    seq   bigint  NOT NULL DEFAULT 0,
    floor bigint  NOT NULL DEFAULT 1
);
INSERT INTO counters DEFAULT VALUES;

-- Artifact heads. A deleted artifact keeps its row (its versions stay
-- readable by id); only live names are unique.
CREATE TABLE artifacts (
    id           text COLLATE "C" PRIMARY KEY,
    name         text COLLATE "C" NOT NULL,
    deleted      boolean NOT NULL DEFAULT false,
    kind         text COLLATE "C" NOT NULL,
    owner        text COLLATE "C" NOT NULL,
    version      bigint NOT NULL,
    content_type text NOT NULL,
    sha256       text COLLATE "C" NOT NULL,
    size         bigint NOT NULL,
    labels       jsonb NOT NULL DEFAULT '{}',
    task_id      text COLLATE "C" NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    created_by   text NOT NULL,
    updated_at   timestamptz NOT NULL,
    updated_by   text NOT NULL
);
CREATE UNIQUE INDEX artifacts_live_name ON artifacts (name) WHERE NOT deleted;
CREATE INDEX artifacts_live_kind ON artifacts (kind, name) WHERE NOT deleted;
CREATE INDEX artifacts_live_owner ON artifacts (owner, name) WHERE NOT deleted;
CREATE INDEX artifacts_live_task ON artifacts (task_id, name) WHERE NOT deleted AND task_id <> '';
CREATE INDEX artifacts_live_labels ON artifacts USING gin (labels jsonb_path_ops) WHERE NOT deleted;

-- Every version's metadata.
CREATE TABLE artifact_versions (
    artifact_id  text COLLATE "C" NOT NULL,
    version      bigint NOT NULL,
    name         text COLLATE "C" NOT NULL,
    kind         text COLLATE "C" NOT NULL,
    owner        text COLLATE "C" NOT NULL,
    content_type text NOT NULL,
    sha256       text COLLATE "C" NOT NULL,
    size         bigint NOT NULL,
    labels       jsonb NOT NULL DEFAULT '{}',
    task_id      text COLLATE "C" NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    created_by   text NOT NULL,
    updated_at   timestamptz NOT NULL,
    updated_by   text NOT NULL,
    PRIMARY KEY (artifact_id, version)
);

-- Content, stored once per (artifact, hash).
CREATE TABLE blobs (
    artifact_id text COLLATE "C" NOT NULL,
    sha256      text COLLATE "C" NOT NULL,
    content     bytea NOT NULL,
    PRIMARY KEY (artifact_id, sha256)
);

-- Tasks. depends_on keeps the dependencies in the order given; ReadyTask
-- looks each one up by primary key.
CREATE TABLE tasks (
    id               text COLLATE "C" PRIMARY KEY,
    title            text NOT NULL,
    description      text NOT NULL,
    status           text COLLATE "C" NOT NULL,
    assignee         text COLLATE "C" NOT NULL,
    parent_id        text COLLATE "C" NOT NULL DEFAULT '',
    depends_on       text[] COLLATE "C" NOT NULL DEFAULT '{}',
    priority         integer NOT NULL,
    labels           jsonb NOT NULL DEFAULT '{}',
    result           jsonb NOT NULL DEFAULT '{}',
    attempts         integer NOT NULL,
    lease_expires_at timestamptz,
    version          bigint NOT NULL,
    created_at       timestamptz NOT NULL,
    created_by       text NOT NULL,
    updated_at       timestamptz NOT NULL,
    updated_by       text NOT NULL
);
-- ReadyTask: pending tasks, highest priority first, then oldest.
CREATE INDEX tasks_ready ON tasks (priority DESC, id) WHERE status = 'pending';
CREATE INDEX tasks_status ON tasks (status, id);
CREATE INDEX tasks_assignee ON tasks (assignee, id) WHERE assignee <> '';
CREATE INDEX tasks_parent ON tasks (parent_id, id) WHERE parent_id <> '';
CREATE INDEX tasks_claim_expiry ON tasks (lease_expires_at) WHERE status = 'in_progress';

CREATE TABLE notes (
    kind       text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    title      text NOT NULL,
    body       text NOT NULL,
    author     text NOT NULL,
    version    bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL,
    PRIMARY KEY (kind, key)
);

-- Leases. A released lease keeps its row (owner '') so that the next token
-- is always higher than every token issued before.
CREATE TABLE leases (
    resource    text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    token       bigint NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);

CREATE TABLE idempotency (
    key        text COLLATE "C" PRIMARY KEY,
    result     bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);

-- The event log. seq is handed out from counters, gap-free in commit order.
CREATE TABLE events (
    seq          bigint PRIMARY KEY,
    time         timestamptz NOT NULL,
    actor        text COLLATE "C" NOT NULL,
    type         text COLLATE "C" NOT NULL,
    subject_kind text COLLATE "C" NOT NULL,
    subject_id   text COLLATE "C" NOT NULL,
    subject_name text COLLATE "C" NOT NULL,
    version      bigint NOT NULL,
    message      text NOT NULL
);
CREATE INDEX events_subject ON events (subject_id, seq);
CREATE INDEX events_actor ON events (actor, seq);
CREATE INDEX events_type ON events (type, seq);
CREATE INDEX events_time ON events (time);
