-- agent17 team state on PostgreSQL (the mailbox, the plans, the teammates), schema
-- version 2, in the same PostgreSQL schema as the task board (`agent17`), with its own
-- version row. Run whole, in one transaction, with search_path set to that schema.
-- The tables are the SQLite mailbox's (team/schema.sql), so the team's SQL is written
-- once for both engines; what PostgreSQL adds is the team lock and the wake-ups.
-- Task state and team messages stay two separate state machines: no foreign key
-- between them, and a report about a task never completes it.

CREATE TABLE team_metadata (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO team_metadata (key, value) VALUES ('schema_version', '2');

-- Every write to the team's state holds this transaction-level advisory lock from its
-- first statement to its commit: writers queue, as SQLite's BEGIN IMMEDIATE makes them
-- queue, so "claim the oldest queued message" and "one verdict per plan" are a read and
-- a write that nobody can come between. (Messages are few; the board has its own lock.)
CREATE FUNCTION team_lock_key() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 7018690069350397795::bigint $$;

-- One row per message; it moves queued -> claimed -> acked and stays, except that a
-- damaged row (one no mailbox writes: see team/message_rows.py) moves to dead_letters.
-- `sequence` (assigned under the team lock, never twice) is the sending order.
-- Types are strict here, unlike SQLite's; what a CHECK does not say (control characters
-- in a name) the readers check on every row, and everything else again too: a row can
-- be written with a constraint dropped for the moment.
CREATE TABLE messages (
    sequence   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recipient  text NOT NULL CHECK (char_length(recipient) BETWEEN 1 AND 200),
    sender     text NOT NULL CHECK (char_length(sender) BETWEEN 1 AND 200),
    kind       text NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 200),
    body       text NOT NULL,
    state      text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'acked')),
    -- At most 1,000,000 deliveries (MAX_DELIVERIES), and a queued message can still have
    -- one more; a claimed or acked one has had at least one. (No BETWEEN inside the AND:
    -- the catalog would print it nested, and that text, read back by a restore from
    -- pg_dump, makes another definition than this file's.)
    deliveries integer NOT NULL DEFAULT 0
               CHECK (deliveries >= 0 AND deliveries <= 1000000
                      AND (state = 'queued' OR deliveries > 0)
                      AND (state <> 'queued' OR deliveries < 1000000))
);

-- A recipient's oldest queued message is a seek: (recipient, 'queued', first sequence).
CREATE INDEX messages_by_recipient ON messages (recipient, state, sequence);

-- Messages set aside unread by their recipient's teammate because their row broke the
-- rules above, with the reason; the values as they were found (no constraint but
-- the key), `sequence` the message's own number.
CREATE TABLE dead_letters (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sequence   bigint NOT NULL,
    recipient  text,
    sender     text,
    kind       text,
    body       text,
    state      text,
    deliveries integer,
    reason     text NOT NULL
);

-- Wake-ups across hosts: a NOTIFY on agent17_mail, with the recipient as its payload,
-- whenever a message becomes queued (sent, or put back by a restarting teammate).
-- Delivered when the sending transaction commits, never before and never after a
-- rollback; the listener then claims from the table (the notification is a hint).
CREATE FUNCTION announce_mail() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM pg_notify('agent17_mail', NEW.recipient);
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_announce_mail
    AFTER INSERT OR UPDATE OF state ON messages
    FOR EACH ROW
    WHEN (NEW.state = 'queued')
    EXECUTE FUNCTION announce_mail();

-- The plan gate: each agent's plans, the latest one (highest sequence) decides.
-- `verdict` is the Lead's answer once sent; `status` moves only when the teammate
-- reads that answer (protocol first, in its own idle loop).
CREATE TABLE plans (
    sequence   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id text NOT NULL UNIQUE,
    agent      text NOT NULL CHECK (char_length(agent) BETWEEN 1 AND 200),
    plan       text NOT NULL CHECK (char_length(plan) > 0),
    status     text NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'approved', 'rejected')),
    verdict    text CHECK (verdict IS NULL OR verdict IN ('approve', 'reject')),
    feedback   text NOT NULL DEFAULT ''
);

CREATE INDEX plans_by_agent ON plans (agent, sequence);

-- Who is on the team, for every host: a teammate joins (active) when its worker starts
-- and is closed only by the shutdown handshake, in the same transaction as its answer
-- to the Lead. Whether a worker is alive right now is not stored (a killed process
-- cannot update a row): it is the session-level advisory lock the worker holds on a
-- connection of its own while it runs (see team/pg_mailbox.py).
CREATE TABLE teammates (
    name  text PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 200),
    state text NOT NULL CHECK (state IN ('active', 'closed')),
    pid   integer,
    host  text NOT NULL DEFAULT ''
);
