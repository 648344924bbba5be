-- agent17 team state (the mailbox, the plans, the teammates), schema version 3, in
-- <workspace>/.agent_tutorial/mailbox.sqlite3. Loaded whole, in one transaction.
-- Apart from tasks.sqlite3 on purpose: task state and team messages are two
-- separate state machines, and a report about a task never completes it.
-- (A CHECK passes when it evaluates to NULL, hence the explicit IS NOT NULLs.)

CREATE TABLE mailbox_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO mailbox_metadata (key, value) VALUES ('schema_version', '3');

-- One row per message; it moves queued -> claimed -> acked and is never deleted,
-- so `sequence` (the rowid) is the sending order.
CREATE TABLE messages (
    sequence   INTEGER PRIMARY KEY,
    recipient  TEXT NOT NULL CHECK (length(recipient) BETWEEN 1 AND 200),
    sender     TEXT NOT NULL CHECK (length(sender) BETWEEN 1 AND 200),
    kind       TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    body       TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'acked')),
    deliveries INTEGER NOT NULL DEFAULT 0 CHECK (deliveries >= 0)
);

-- A recipient's oldest queued message is a seek: (recipient, 'queued', first sequence).
CREATE INDEX messages_by_recipient ON messages (recipient, state, sequence);

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
