-- agent17 task board, schema version 2. Loaded whole, in one transaction, into an empty file.
-- The invariants live here, in the database, so that no caller (and no bug in a
-- caller, and no hand-written UPDATE) can store a half-claimed task, a dangling
-- dependency, a cycle, a skipped step of the lifecycle, or a transition that the
-- event log does not show.
-- Times are UTC text of one fixed width (2026-01-01T09:05:00.000000Z), so text
-- order is time order and the lease comparison can use an index.
-- (A CHECK passes when it evaluates to NULL, hence the explicit IS NOT NULLs.)

CREATE TABLE task_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO task_metadata (key, value) VALUES ('schema_version', '2');

CREATE TABLE tasks (
    -- Creation order. AUTOINCREMENT: a sequence is never reused, even after a delete.
    sequence             INTEGER PRIMARY KEY AUTOINCREMENT,
    id                   TEXT NOT NULL UNIQUE CHECK (length(id) = 36 AND id = lower(id)),
    subject              TEXT NOT NULL CHECK (length(trim(subject)) > 0),
    description          TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
    owner                TEXT CHECK (owner IS NULL OR length(owner) BETWEEN 1 AND 200),
    -- The token of the current claim. Unique because every token ever issued is
    -- unique in the event log (task_claim_tokens below); no second index needed.
    claim_token          TEXT,
    -- When the task entered its current status: created, claimed, completed or released.
    changed_at_utc       TEXT NOT NULL,
    lease_expires_at_utc TEXT,
    -- Readiness kept as data: how many dependencies are not completed yet.
    unmet_dependencies   INTEGER NOT NULL DEFAULT 0 CHECK (unmet_dependencies >= 0),
    CHECK (
        (status = 'pending' AND owner IS NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL)
        OR (status = 'in_progress' AND owner IS NOT NULL AND claim_token IS NOT NULL
            AND lease_expires_at_utc IS NOT NULL AND changed_at_utc < lease_expires_at_utc
            AND unmet_dependencies = 0)
        OR (status = 'completed' AND owner IS NOT NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL AND unmet_dependencies = 0)
    )
);

-- The one index of the hot path. A ready task is (pending, 0 unmet, no lease):
-- claim_next seeks the first such entry, so its cost does not grow with the
-- board. A lease that ran out is (in_progress, 0, lease <= now): the release
-- at the start of every operation seeks those.
CREATE INDEX tasks_by_state
    ON tasks (status, unmet_dependencies, lease_expires_at_utc, sequence);

-- Edges point from a task to a strictly older task: a cycle cannot be stored.
CREATE TABLE task_dependencies (
    task_sequence       INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    dependency_sequence INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    position            INTEGER NOT NULL CHECK (position >= 0),
    PRIMARY KEY (task_sequence, dependency_sequence),
    UNIQUE (task_sequence, position),
    CHECK (dependency_sequence < task_sequence)
) WITHOUT ROWID;

-- Completing a task visits its dependents through this index.
CREATE INDEX task_dependents ON task_dependencies (dependency_sequence);

-- The append-only log of every transition, written by the triggers below in the
-- very statement that makes the transition. `sequence` is the rowid: rows are
-- never deleted, so it is dense and in commit order without AUTOINCREMENT's
-- extra write per insert.
CREATE TABLE task_events (
    sequence             INTEGER PRIMARY KEY,
    at_utc               TEXT NOT NULL,
    kind                 TEXT NOT NULL
                         CHECK (kind IN ('created', 'claimed', 'completed', 'lease_expired')),
    task_sequence        INTEGER NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    owner                TEXT,
    claim_token          TEXT,
    lease_expires_at_utc TEXT,
    CHECK (
        (kind = 'created' AND owner IS NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL)
        OR (kind = 'claimed' AND owner IS NOT NULL AND claim_token IS NOT NULL
            AND lease_expires_at_utc IS NOT NULL AND lease_expires_at_utc > at_utc)
        OR (kind IN ('completed', 'lease_expired') AND owner IS NOT NULL
            AND claim_token IS NOT NULL AND lease_expires_at_utc IS NULL)
    )
);

-- The token history: every claim token ever issued is in exactly one claimed
-- event, for the lifetime of the file. A generator that repeats a token fails
-- here, and the whole claim rolls back.
CREATE UNIQUE INDEX task_claim_tokens ON task_events (claim_token) WHERE kind = 'claimed';

CREATE TRIGGER task_events_are_append_only_update
BEFORE UPDATE ON task_events BEGIN
    SELECT RAISE(ABORT, 'task_events is append-only');
END;

CREATE TRIGGER task_events_are_append_only_delete
BEFORE DELETE ON task_events BEGIN
    SELECT RAISE(ABORT, 'task_events is append-only');
END;

-- The lifecycle: pending -> in_progress -> completed, and in_progress -> pending
-- when a lease ends. Nothing else, whoever writes the UPDATE.
CREATE TRIGGER tasks_follow_the_lifecycle
BEFORE UPDATE OF status ON tasks
WHEN NEW.status IS NOT OLD.status
    AND NOT (OLD.status = 'pending' AND NEW.status = 'in_progress')
    AND NOT (OLD.status = 'in_progress' AND NEW.status IN ('completed', 'pending'))
BEGIN
    SELECT RAISE(ABORT, 'a task goes pending -> in_progress -> completed, or back to pending');
END;

-- Every transition is logged with the row's own time, owner and token; a claim
-- whose token was ever issued before fails here (task_claim_tokens is unique).
CREATE TRIGGER tasks_log_their_creation
AFTER INSERT ON tasks BEGIN
    INSERT INTO task_events (at_utc, kind, task_sequence)
    VALUES (NEW.changed_at_utc, 'created', NEW.sequence);
END;

CREATE TRIGGER tasks_log_every_transition
AFTER UPDATE OF status ON tasks
WHEN NEW.status IS NOT OLD.status
BEGIN
    INSERT INTO task_events
        (at_utc, kind, task_sequence, owner, claim_token, lease_expires_at_utc)
    VALUES (
        NEW.changed_at_utc,
        CASE NEW.status
            WHEN 'in_progress' THEN 'claimed'
            WHEN 'completed' THEN 'completed'
            ELSE 'lease_expired'
        END,
        NEW.sequence,
        coalesce(NEW.owner, OLD.owner),
        coalesce(NEW.claim_token, OLD.claim_token),
        NEW.lease_expires_at_utc
    );
END;
