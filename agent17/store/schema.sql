-- agent17 task board, schema version 1.
-- The invariants live here, in the database, so that no caller (and no bug in
-- a caller) can store a half-claimed task, a dangling dependency or a cycle.
-- Times are UTC text of fixed width (2026-01-01T00:05:00.000000Z), so text
-- order is time order and the lease comparison can use an index.

CREATE TABLE IF NOT EXISTS task_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS tasks (
    -- Creation order. AUTOINCREMENT: a sequence is never reused, even after a delete.
    sequence             INTEGER PRIMARY KEY AUTOINCREMENT,
    id                   TEXT NOT NULL UNIQUE CHECK (length(id) = 36 AND id = lower(id)),
    subject              TEXT NOT NULL CHECK (length(trim(subject)) > 0),
    description          TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
    owner                TEXT CHECK (owner IS NULL OR length(owner) > 0),
    claim_token          TEXT UNIQUE,
    claimed_at_utc       TEXT,
    lease_expires_at_utc TEXT,
    -- Readiness kept as data: how many dependencies are not completed yet.
    -- claim_next looks for status = 'pending' AND unmet_dependencies = 0.
    unmet_dependencies   INTEGER NOT NULL DEFAULT 0 CHECK (unmet_dependencies >= 0),
    CHECK (
        (status = 'pending' AND owner IS NULL AND claim_token IS NULL
            AND claimed_at_utc IS NULL AND lease_expires_at_utc IS NULL)
        OR (status = 'in_progress' AND owner IS NOT NULL AND claim_token IS NOT NULL
            AND claimed_at_utc IS NOT NULL AND lease_expires_at_utc IS NOT NULL
            AND claimed_at_utc < lease_expires_at_utc AND unmet_dependencies = 0)
        OR (status = 'completed' AND owner IS NOT NULL AND claim_token IS NULL
            AND claimed_at_utc IS NULL AND lease_expires_at_utc IS NULL
            AND unmet_dependencies = 0)
    )
);

-- The one index claim_next needs: the first ready task is a seek, not a scan.
CREATE INDEX IF NOT EXISTS tasks_ready ON tasks (status, unmet_dependencies, sequence);
-- Expired leases are found by time, without touching pending or completed rows.
CREATE INDEX IF NOT EXISTS tasks_lease ON tasks (lease_expires_at_utc)
    WHERE status = 'in_progress';

-- Edges point from a task to a strictly older task: a cycle cannot be stored.
CREATE TABLE IF NOT EXISTS task_dependencies (
    task_sequence       INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    dependency_sequence INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    position            INTEGER NOT NULL CHECK (position >= 0),
    PRIMARY KEY (task_sequence, dependency_sequence),
    UNIQUE (task_sequence, position),
    CHECK (dependency_sequence < task_sequence)
) WITHOUT ROWID;

-- Completing a task visits its dependents through this index.
CREATE INDEX IF NOT EXISTS task_dependents ON task_dependencies (dependency_sequence);

-- Every claim token ever issued, for the lifetime of the database, in issue
-- order (rowid). A generator that repeats a token fails here, and the whole
-- claim rolls back.
CREATE TABLE IF NOT EXISTS task_claim_tokens (
    token                TEXT NOT NULL UNIQUE,
    task_sequence        INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    owner                TEXT NOT NULL,
    claimed_at_utc       TEXT NOT NULL,
    lease_expires_at_utc TEXT NOT NULL
);

-- The append-only log of transitions; the timeline and the replay read it.
CREATE TABLE IF NOT EXISTS task_events (
    sequence      INTEGER PRIMARY KEY AUTOINCREMENT,
    at_utc        TEXT NOT NULL,
    kind          TEXT NOT NULL
                  CHECK (kind IN ('created', 'claimed', 'completed', 'lease_expired')),
    task_sequence INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    owner         TEXT,
    claim_token   TEXT
);

CREATE TRIGGER IF NOT EXISTS task_events_are_append_only_update
BEFORE UPDATE ON task_events BEGIN
    SELECT RAISE(ABORT, 'task_events is append-only');
END;

CREATE TRIGGER IF NOT EXISTS task_events_are_append_only_delete
BEFORE DELETE ON task_events BEGIN
    SELECT RAISE(ABORT, 'task_events is append-only');
END;

INSERT OR IGNORE INTO task_metadata (key, value) VALUES ('schema_version', '1');
