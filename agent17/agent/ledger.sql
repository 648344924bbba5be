-- agent17 idempotency ledger, schema version 1, in
-- <workspace>/.agent_tutorial/idempotency.sqlite3. Loaded whole, in one transaction.
-- One row per effectful tool call that ran and succeeded inside a keyed agent
-- run (the key is the auto-claimed task's claim token). A retry of that run
-- gets the recorded result instead of running the call again.

CREATE TABLE ledger_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO ledger_metadata (key, value) VALUES ('schema_version', '1');

CREATE TABLE tool_results (
    idempotency_key TEXT NOT NULL,
    ordinal         INTEGER NOT NULL CHECK (ordinal >= 0),
    tool            TEXT NOT NULL,
    arguments_json  TEXT NOT NULL,
    result_json     TEXT NOT NULL,
    PRIMARY KEY (idempotency_key, ordinal, tool, arguments_json)
) WITHOUT ROWID;
