-- agent17 team state (the mailbox, the plans, the teammates), schema version 4, in
-- <workspace>/.agent_tutorial/mailbox.sqlite3. Loaded whole, in one transaction.
-- Apart from tasks.sqlite3 on purpose: task state and team messages are two
-- separate state machines, and a report about a task never completes it.
-- (A CHECK passes when it evaluates to NULL, hence the explicit IS NOT NULLs.)

CREATE TABLE mailbox_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO mailbox_metadata (key, value) VALUES ('schema_version', '4');

-- One row per message; it moves queued -> claimed -> acked and stays, except that a
-- damaged row (one no mailbox writes: see team/message_rows.py) moves to dead_letters.
-- AUTOINCREMENT: a number is never given out twice, not even one a dead letter took,
-- so `sequence` is the sending order and names one message for good.
-- SQLite keeps any value in any column (a BLOB in a TEXT column), hence the typeof
-- checks. What a CHECK cannot say the same way on both engines (control characters
-- in a name, NUL in a body, valid UTF-8) the readers check on every row instead, and
-- they check everything else again too: a row can be written past these checks.
CREATE TABLE messages (
    sequence   INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient  TEXT NOT NULL
               CHECK (typeof(recipient) = 'text' AND length(recipient) BETWEEN 1 AND 200),
    sender     TEXT NOT NULL
               CHECK (typeof(sender) = 'text' AND length(sender) BETWEEN 1 AND 200),
    kind       TEXT NOT NULL CHECK (typeof(kind) = 'text' AND length(kind) BETWEEN 1 AND 200),
    body       TEXT NOT NULL CHECK (typeof(body) = 'text'),
    state      TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'acked')),
    -- At most 1,000,000 deliveries (MAX_DELIVERIES), and a queued message can still have
    -- one more; a claimed or acked one has had at least one.
    deliveries INTEGER NOT NULL DEFAULT 0
               CHECK (typeof(deliveries) = 'integer' AND deliveries BETWEEN 0 AND 1000000
                      AND (state = 'queued' OR deliveries > 0)
                      AND (state <> 'queued' OR deliveries < 1000000))
);

-- A recipient's oldest queued message is a seek: (recipient, 'queued', first sequence).
CREATE INDEX messages_by_recipient ON messages (recipient, state, sequence);

-- Messages set aside unread by their recipient's teammate because their row broke the
-- rules above, with the reason. Columns without a type keep any value exactly as it
-- was found, for whoever looks into it; `sequence` is the message's own number.
CREATE TABLE dead_letters (
    id         INTEGER PRIMARY KEY,
    sequence   INTEGER NOT NULL,
    recipient,
    sender,
    kind,
    body,
    state,
    deliveries,
    reason     TEXT NOT NULL
);

-- The plan gate: each agent's plans, the latest one (highest sequence) decides.
-- `verdict` is the Lead's answer once sent; `status` moves only when the
-- teammate reads that answer (protocol first, in its own idle loop).
CREATE TABLE plans (
    sequence   INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE,
    agent      TEXT NOT NULL CHECK (length(agent) BETWEEN 1 AND 200),
    plan       TEXT NOT NULL CHECK (length(plan) > 0),
    status     TEXT NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'approved', 'rejected')),
    verdict    TEXT CHECK (verdict IS NULL OR verdict IN ('approve', 'reject')),
    feedback   TEXT NOT NULL DEFAULT ''
);

CREATE INDEX plans_by_agent ON plans (agent, sequence);

-- Who is on the team, for every process: a teammate joins (active) when its
-- worker starts and is closed only by the shutdown handshake, in the same
-- transaction as its answer to the Lead. Whether a worker is alive right now
-- is not stored (a killed process cannot update a row): it is the lock the
-- worker holds while it runs (see team/registry.py).
CREATE TABLE teammates (
    name  TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    state TEXT NOT NULL CHECK (state IN ('active', 'closed')),
    pid   INTEGER,
    host  TEXT NOT NULL DEFAULT ''
);
