-- agent17 task board on PostgreSQL, schema version 1. Run whole, in one transaction,
-- with search_path set to the board's own schema (names here are unqualified, so the
-- same file also builds the throwaway reference the open check compares against).
-- The rules are the SQLite board's (schema.sql), kept by the database itself so that
-- no caller and no hand-written UPDATE can store a half claim, a dangling or newer
-- dependency, a skipped step of the lifecycle, a reused claim token, or a transition
-- that the event log does not show.
-- (A CHECK passes when it evaluates to NULL, hence the explicit IS NOT NULLs.)

CREATE TABLE task_metadata (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO task_metadata (key, value) VALUES ('schema_version', '1');

-- The board lock: every writer holds this transaction-level advisory lock from its
-- first statement to its commit, so claims, completions and the event log are in
-- one order. One board per database, so one key (advisory keys are per database).
CREATE FUNCTION board_lock_key() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 7018690069350397794::bigint $$;

-- The first thing every operation does, in the statement that takes the lock: the
-- clock is read after the lock is granted (clock_timestamp(), not now(), which is the
-- transaction's start, before the wait), so time moves in commit order for every host.
CREATE FUNCTION lock_board() RETURNS timestamptz
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(board_lock_key());
    RETURN clock_timestamp();
END
$$;

CREATE TABLE tasks (
    -- Creation order: assigned under the board lock, so it only grows (gaps are harmless).
    sequence             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                   text NOT NULL UNIQUE
                         CHECK (id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
    subject              text NOT NULL CHECK (btrim(subject) <> ''),
    description          text NOT NULL,
    status               text NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
    owner                text CHECK (owner IS NULL OR char_length(owner) BETWEEN 1 AND 200),
    -- The current claim's token; unique over the board's life through task_claim_tokens.
    claim_token          text,
    changed_at_utc       timestamptz NOT NULL,
    lease_expires_at_utc timestamptz,
    -- Readiness kept as data: how many dependencies are not completed yet.
    unmet_dependencies   integer NOT NULL DEFAULT 0
                         CONSTRAINT tasks_unmet_is_not_negative CHECK (unmet_dependencies >= 0),
    CONSTRAINT tasks_status_matches_the_claim CHECK (
        (status = 'pending' AND owner IS NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL)
        OR (status = 'in_progress' AND owner IS NOT NULL AND claim_token IS NOT NULL
            AND lease_expires_at_utc IS NOT NULL AND changed_at_utc < lease_expires_at_utc
            AND unmet_dependencies = 0)
        OR (status = 'completed' AND owner IS NOT NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL AND unmet_dependencies = 0)
    )
);

-- The hot path. claim_next reads the first entry of tasks_ready; it holds only ready
-- tasks, so the seek costs the same on a board of 200 or 200,000 tasks.
CREATE INDEX tasks_ready ON tasks (sequence)
    WHERE status = 'pending' AND unmet_dependencies = 0;
-- The release of run-out leases at the start of every operation seeks this one.
CREATE INDEX tasks_leased ON tasks (lease_expires_at_utc) WHERE status = 'in_progress';

-- The second thing every operation does: leases that have run out at `at` go back to
-- pending (half-open [claimed_at, expires_at): at the expiry instant it is over); the
-- trigger logs one lease_expired event each. A function, so that the default path
-- sends lock, clock and release as one statement (`SELECT release_expired(lock_board())`):
-- its UPDATE is a statement of its own, with a snapshot taken after the lock.
CREATE FUNCTION release_expired(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    UPDATE tasks
       SET status = 'pending', owner = NULL, claim_token = NULL,
           changed_at_utc = at, lease_expires_at_utc = NULL
     WHERE status = 'in_progress' AND lease_expires_at_utc <= at;
    RETURN at;
END
$$;

-- Edges point from a task to a strictly older task: a cycle cannot be stored.
CREATE TABLE task_dependencies (
    task_sequence       bigint NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    dependency_sequence bigint NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    position            integer NOT NULL CHECK (position >= 0),
    PRIMARY KEY (task_sequence, dependency_sequence),
    UNIQUE (task_sequence, position),
    CONSTRAINT task_dependencies_are_older CHECK (dependency_sequence < task_sequence)
);
CREATE INDEX task_dependents ON task_dependencies (dependency_sequence);

-- The append-only log of every transition, written by the triggers below in the
-- statement that makes the transition. `sequence` is max + 1 under the board lock,
-- not a PostgreSQL sequence: a sequence skips numbers on rollback and hands them out
-- in start order, not commit order; this one is dense and in commit order.
CREATE TABLE task_events (
    sequence             bigint PRIMARY KEY CHECK (sequence > 0),
    at_utc               timestamptz NOT NULL,
    kind                 text NOT NULL
                         CHECK (kind IN ('created', 'claimed', 'completed', 'lease_expired')),
    task_sequence        bigint NOT NULL REFERENCES tasks (sequence) ON DELETE RESTRICT,
    owner                text,
    claim_token          text,
    lease_expires_at_utc timestamptz,
    CONSTRAINT task_events_carry_their_claim CHECK (
        (kind = 'created' AND owner IS NULL AND claim_token IS NULL
            AND lease_expires_at_utc IS NULL)
        OR (kind = 'claimed' AND owner IS NOT NULL AND claim_token IS NOT NULL
            AND lease_expires_at_utc IS NOT NULL AND lease_expires_at_utc > at_utc)
        OR (kind IN ('completed', 'lease_expired') AND owner IS NOT NULL
            AND claim_token IS NOT NULL AND lease_expires_at_utc IS NULL)
    )
);

-- The token history: every claim token ever issued is in exactly one claimed event.
-- A generator that repeats a token fails here, and the whole claim rolls back.
CREATE UNIQUE INDEX task_claim_tokens ON task_events (claim_token) WHERE kind = 'claimed';

-- Functions pin search_path to this schema, so a hand-written UPDATE from a session
-- with another search_path still logs into (and is checked against) these tables.
CREATE FUNCTION refuse_history_rewrite() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    RAISE EXCEPTION 'task_events is append-only';
END
$$;

-- ALWAYS: not even a session in replica mode (which skips ordinary triggers) rewrites it.
CREATE TRIGGER task_events_are_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON task_events
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();
ALTER TABLE task_events ENABLE ALWAYS TRIGGER task_events_are_append_only;

-- The lifecycle: pending -> in_progress -> completed, and in_progress -> pending when
-- a lease ends. Nothing else, whoever writes the UPDATE.
CREATE FUNCTION refuse_a_skipped_step() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    RAISE EXCEPTION 'a task goes pending -> in_progress -> completed, or back to pending';
END
$$;

CREATE TRIGGER tasks_follow_the_lifecycle
    BEFORE UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
        AND NOT (OLD.status = 'pending' AND NEW.status = 'in_progress')
        AND NOT (OLD.status = 'in_progress' AND NEW.status IN ('completed', 'pending')))
    EXECUTE FUNCTION refuse_a_skipped_step();

-- Wake-ups for teammates on every host: a NOTIFY on the channel agent17_board whenever
-- a task becomes ready (created ready, its last dependency completed, its lease run
-- out). Sent by the transaction that makes it ready, and PostgreSQL delivers it only
-- when that transaction commits, so a listener never hears of a change it cannot
-- see yet, and never of one that was rolled back. Identical notifications of one
-- transaction are delivered once. A hint, not the truth: the listener rescans the board.
CREATE FUNCTION announce_ready() RETURNS void
    LANGUAGE sql
    AS $$ SELECT pg_notify('agent17_board', 'ready') $$;

CREATE FUNCTION announce_ready_row() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM announce_ready();
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_announce_ready
    AFTER UPDATE OF status, unmet_dependencies ON tasks
    FOR EACH ROW
    WHEN (NEW.status = 'pending' AND NEW.unmet_dependencies = 0
        AND (OLD.status <> 'pending' OR OLD.unmet_dependencies <> 0))
    EXECUTE FUNCTION announce_ready_row();

-- Creations are logged once per statement (a batch of 40,000 tasks is one INSERT),
-- in creation order. The triggers take the board lock themselves (a no-op for the
-- store, which holds it already), so even a writer that forgot it keeps the log dense.
CREATE FUNCTION log_creations() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(board_lock_key());
    INSERT INTO task_events (sequence, at_utc, kind, task_sequence)
    SELECT last.sequence + row_number() OVER (ORDER BY created.sequence),
           created.changed_at_utc, 'created', created.sequence
      FROM created, (SELECT coalesce(max(sequence), 0) AS sequence FROM task_events) AS last;
    IF EXISTS (SELECT 1 FROM created WHERE status = 'pending' AND unmet_dependencies = 0) THEN
        PERFORM announce_ready();
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_log_their_creation
    AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION log_creations();

-- Every transition is logged with the row's own time, owner and token; a claim whose
-- token was ever issued before fails here (task_claim_tokens is unique). Per row with
-- a WHEN, so the statements that change no status (a release that finds no run-out
-- lease, an unmet count going down) never run it.
CREATE FUNCTION log_transition() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(board_lock_key());
    INSERT INTO task_events
        (sequence, at_utc, kind, task_sequence, owner, claim_token, lease_expires_at_utc)
    VALUES (
        (SELECT coalesce(max(sequence), 0) + 1 FROM task_events),
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
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_log_every_transition
    AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status)
    EXECUTE FUNCTION log_transition();
