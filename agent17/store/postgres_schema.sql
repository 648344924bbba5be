-- agent17 task board on PostgreSQL, run whole in one transaction with search_path set to
-- the board's own schema (names are unqualified: the same file builds the reference the
-- open check compares against). The rules are schema.sql's, kept by the database itself
-- against any caller and any hand-written UPDATE. (A CHECK passes when it evaluates to
-- NULL, hence the explicit IS NOT NULLs.)

CREATE TABLE task_metadata (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO task_metadata (key, value) VALUES ('schema_version', '3');

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
-- trigger logs one lease_expired event each. A function, called by open_board once the
-- lock is held: its UPDATE is a statement of its own, with a snapshot taken after the
-- lock (called alone, it needs the store's search_path, like the helpers below).
CREATE FUNCTION release_expired(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql
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

-- The board's operations, each one server-side function that the store sends with its
-- BEGIN and COMMIT (store/engine.py says what each does): everything that must refuse a
-- write happens in here, before that COMMIT (a broken graph too: `checked`). Each
-- returns board_rows, tagged by part: 'rows', 'then', 'explained', or one 'now' row
-- when there is none of those; every row carries the operation's clock.
CREATE TYPE board_row AS (
    part                        text,
    at_utc                      timestamptz,
    sequence                    bigint,
    id                          text,
    subject                     text,
    description                 text,
    status                      text,
    owner                       text,
    unmet_dependencies          integer,
    claim_token                 text,
    lease_expires_at_utc        timestamptz,
    -- The task's edges in position order: [sequence, [id, status]] per edge,
    -- [sequence, null] when the target row is missing.
    edges                       json,
    -- For a refusal of a token: the claim the token history says it was issued for.
    issued_task_sequence        bigint,
    issued_owner                text,
    issued_lease_expires_at_utc timestamptz
);

-- The helpers (row_of, open_board, release_expired, take, refused) inherit the search_path
-- of the entry point that calls them: pinning it costs a setting change per call. They
-- are plpgsql, whose plans last the session (a plain SQL function called from a function
-- is planned on every call). Each edge's target is a primary-key lookup, never a scan.
CREATE FUNCTION row_of(part text, at timestamptz, t tasks, issued task_events DEFAULT NULL)
    RETURNS board_row
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (part, at, t.sequence, t.id, t.subject, t.description, t.status, t.owner,
            t.unmet_dependencies, t.claim_token, t.lease_expires_at_utc,
            (SELECT coalesce(json_agg(json_build_array(
                        d.dependency_sequence,
                        (SELECT json_build_array(dep.id, dep.status) FROM tasks AS dep
                          WHERE dep.sequence = d.dependency_sequence)) ORDER BY d.position),
                        '[]')
               FROM task_dependencies AS d WHERE d.task_sequence = t.sequence),
            issued.task_sequence, issued.owner, issued.lease_expires_at_utc)::board_row;
END
$$;

-- A task row whose edges break the graph's rules (the board's check_edges, the same
-- words), refused with SQLSTATE A17GC, which the store reads as graph_corrupted: a
-- claim or a completion on a board edited behind the store's back is rolled back,
-- never committed. The schema makes these impossible; a restored dump can hold them.
CREATE FUNCTION checked(r board_row) RETURNS board_row
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    edge json;
    target bigint;
    unfinished integer := 0;
BEGIN
    FOR edge IN SELECT json_array_elements(r.edges) LOOP
        target := (edge->>0)::bigint;
        IF json_typeof(edge->1) = 'null' THEN
            RAISE EXCEPTION USING ERRCODE = 'A17GC',
                MESSAGE = format('a dependency of task %s points at a missing task', r.id);
        ELSIF target = r.sequence THEN
            RAISE EXCEPTION USING ERRCODE = 'A17GC',
                MESSAGE = format('task %s depends on itself', r.id);
        ELSIF target > r.sequence THEN
            RAISE EXCEPTION USING ERRCODE = 'A17GC',
                MESSAGE = format('task %s depends on the newer task %s: a dependency must be'
                                 ' older, or cycles become possible', r.id, edge->1->>0);
        ELSIF edge->1->>1 <> 'completed' THEN
            unfinished := unfinished + 1;
        END IF;
    END LOOP;
    IF unfinished <> r.unmet_dependencies THEN
        RAISE EXCEPTION USING ERRCODE = 'A17GC',
            MESSAGE = format('task %s records %s unmet dependencies but its edges show %s',
                             r.id, r.unmet_dependencies, unfinished);
    END IF;
    RETURN r;
END
$$;

-- Lock, clock, release: the start of every operation. `at` is the injected clock's
-- reading, or NULL for the server's, read once the lock is held.
CREATE FUNCTION open_board(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(board_lock_key());
    RETURN release_expired(coalesce(at, clock_timestamp()));
END
$$;

-- Take `target` (read under the lock) for `new_owner`: the trigger logs the claimed
-- event and refuses a token that was ever issued before.
CREATE FUNCTION take(target tasks, at timestamptz, lease interval, new_owner text, token text)
    RETURNS board_row
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE tasks
       SET status = 'in_progress', owner = new_owner, claim_token = token,
           changed_at_utc = at, lease_expires_at_utc = at + lease
     WHERE sequence = target.sequence
    RETURNING * INTO target;
    RETURN checked(row_of('rows', at, target));
END
$$;

-- The first ready task in creation order (a seek on tasks_ready), taken.
CREATE FUNCTION claim_next(clock timestamptz, lease interval, new_owner text, token text)
    RETURNS SETOF board_row
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(clock);
    target tasks;
BEGIN
    SELECT * INTO target FROM tasks
     WHERE status = 'pending' AND unmet_dependencies = 0
     ORDER BY sequence LIMIT 1;
    IF FOUND THEN
        RETURN NEXT take(target, at, lease, new_owner, token);
    ELSE
        RETURN NEXT row_of('now', at, NULL);
    END IF;
END
$$;

-- One named task, taken if it is ready; else explained as it is.
CREATE FUNCTION claim_task(clock timestamptz, lease interval, task_id text, new_owner text,
                           token text)
    RETURNS SETOF board_row
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(clock);
    target tasks;
BEGIN
    SELECT * INTO target FROM tasks WHERE id = task_id;
    IF NOT FOUND THEN
        RETURN NEXT row_of('now', at, NULL);
    ELSIF target.status = 'pending' AND target.unmet_dependencies = 0 THEN
        RETURN NEXT take(target, at, lease, new_owner, token);
    ELSE
        RETURN NEXT row_of('explained', at, target);
    END IF;
END
$$;

-- The task as it is, with the claim the token history says `token` was issued for.
CREATE FUNCTION refused(at timestamptz, task_id text, token text)
    RETURNS board_row
    LANGUAGE plpgsql
    AS $$
DECLARE
    target tasks;
    issued task_events;
BEGIN
    SELECT * INTO target FROM tasks WHERE id = task_id;
    IF NOT FOUND THEN
        RETURN row_of('now', at, NULL);
    END IF;
    SELECT * INTO issued FROM task_events AS e WHERE e.kind = 'claimed' AND e.claim_token = token;
    RETURN row_of('explained', at, target, issued);
END
$$;

-- Complete a task its owner holds with the current token, then one unmet dependency
-- fewer for each of its dependents (a count that would go below zero fails its check).
CREATE FUNCTION complete_task(clock timestamptz, task_id text, holder text, token text)
    RETURNS SETOF board_row
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(clock);
    done tasks;
    dependent tasks;
BEGIN
    UPDATE tasks
       SET status = 'completed', claim_token = NULL,
           changed_at_utc = at, lease_expires_at_utc = NULL
     WHERE id = task_id AND status = 'in_progress' AND owner = holder AND claim_token = token
    RETURNING * INTO done;
    IF NOT FOUND THEN
        RETURN NEXT refused(at, task_id, token);
        RETURN;
    END IF;
    RETURN NEXT checked(row_of('rows', at, done));
    FOR dependent IN
        UPDATE tasks SET unmet_dependencies = unmet_dependencies - 1
         WHERE sequence IN (SELECT task_sequence FROM task_dependencies
                             WHERE dependency_sequence = done.sequence)
        RETURNING *
    LOOP
        RETURN NEXT checked(row_of('then', at, dependent));
    END LOOP;
END
$$;

-- A claim whose caller was interrupted while its message (BEGIN, claim, COMMIT) was on
-- its way may have committed with nobody left to hold it. Its lease ends now, logged as
-- lease_expired at this instant, so the task is pending again at once instead of when
-- the lease would have run out. Nothing happens when that claim never committed.
CREATE FUNCTION give_back(holder text, token text) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(NULL);
BEGIN
    UPDATE tasks
       SET status = 'pending', owner = NULL, claim_token = NULL,
           changed_at_utc = at, lease_expires_at_utc = NULL
     WHERE status = 'in_progress' AND owner = holder AND claim_token = token;
END
$$;

-- The task if `holder` holds it with `token` (the fence of an effect), else explained.
CREATE FUNCTION verify_claim(clock timestamptz, task_id text, holder text, token text)
    RETURNS SETOF board_row
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(clock);
    held tasks;
BEGIN
    SELECT * INTO held FROM tasks
     WHERE id = task_id AND status = 'in_progress' AND owner = holder AND claim_token = token;
    IF FOUND THEN
        RETURN NEXT row_of('rows', at, held);
    ELSE
        RETURN NEXT refused(at, task_id, token);
    END IF;
END
$$;

-- One task by id, or none.
CREATE FUNCTION get_task(clock timestamptz, task_id text)
    RETURNS SETOF board_row
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    at timestamptz := open_board(clock);
    target tasks;
BEGIN
    SELECT * INTO target FROM tasks WHERE id = task_id;
    RETURN NEXT row_of(CASE WHEN FOUND THEN 'rows' ELSE 'now' END, at, target);
END
$$;
