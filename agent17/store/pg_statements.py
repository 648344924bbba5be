"""The SQL of PostgresTaskStore, one statement per step of an operation.

Names are unqualified: the store's session has search_path set to the board's
own schema (pg_connection). Parameters are bound by the server (psycopg), so a
list of any length is one array parameter, never a statement built from input.
"""

from __future__ import annotations

from typing import Final

# How every operation opens, sent with its BEGIN as one message: the board lock, the
# server's clock read after it, the release of run-out leases (postgres_schema.sql).
OPEN_ON_SERVER_CLOCK: Final = "SELECT release_expired(lock_board())"
# With an injected clock, read in Python once the lock is held, then the release.
OPEN_ON_OWN_CLOCK: Final = "SELECT lock_board()"
RELEASE_EXPIRED_SQL: Final = "SELECT release_expired(%(now)s)"

# A task row with its dependency edges in position order: [sequence, [id, status]] of
# each target, [sequence, null] when the target row is missing. The target is a
# correlated subquery, which the planner cannot turn into a join: one primary-key
# lookup per edge, never a scan of the board (even before the board is analyzed).
COLUMNS: Final = """
t.sequence, t.id, t.subject, t.description, t.status, t.owner, t.unmet_dependencies,
t.claim_token, t.lease_expires_at_utc,
(SELECT coalesce(json_agg(json_build_array(
            d.dependency_sequence,
            (SELECT json_build_array(dep.id, dep.status) FROM tasks AS dep
              WHERE dep.sequence = d.dependency_sequence)) ORDER BY d.position), '[]')
   FROM task_dependencies AS d WHERE d.task_sequence = t.sequence)
"""

CLAIM_SET: Final = """
UPDATE tasks AS t
   SET status = 'in_progress', owner = %(owner)s, claim_token = %(token)s,
       changed_at_utc = %(now)s, lease_expires_at_utc = %(expires)s
"""

# The claim, in one statement: seek the first ready task on tasks_ready and take
# it. The schema's trigger logs the `claimed` event in the same statement and
# refuses a token that was ever issued before.
CLAIM_NEXT_SQL: Final = f"""{CLAIM_SET}
 WHERE t.sequence = (SELECT sequence FROM tasks
                      WHERE status = 'pending' AND unmet_dependencies = 0
                      ORDER BY sequence LIMIT 1)
RETURNING {COLUMNS}"""

CLAIM_TASK_SQL: Final = f"""{CLAIM_SET}
 WHERE t.sequence = %(sequence)s AND t.status = 'pending' AND t.unmet_dependencies = 0
RETURNING {COLUMNS}"""

# Only the owner, with the current token, of a task in progress. (The lease was
# checked a moment earlier: an expired one was already released.)
COMPLETE_SQL: Final = f"""
UPDATE tasks AS t
   SET status = 'completed', claim_token = NULL,
       changed_at_utc = %(now)s, lease_expires_at_utc = NULL
 WHERE t.id = %(task_id)s AND t.status = 'in_progress' AND t.owner = %(owner)s
   AND t.claim_token = %(token)s
RETURNING {COLUMNS}"""

RELEASE_DEPENDENTS_SQL: Final = f"""
UPDATE tasks AS t SET unmet_dependencies = t.unmet_dependencies - 1
 WHERE t.sequence IN (SELECT task_sequence FROM task_dependencies
                       WHERE dependency_sequence = %s)
RETURNING {COLUMNS}"""

# A batch of new tasks in one statement, inserted in draft order (so their
# sequences, and their `created` events, follow it).
INSERT_SQL: Final = """
INSERT INTO tasks (id, subject, description, status, changed_at_utc, unmet_dependencies)
SELECT d.id, d.subject, d.description, 'pending', %(now)s, d.unmet
  FROM unnest(%(ids)s::text[], %(subjects)s::text[], %(descriptions)s::text[],
              %(unmet)s::integer[]) WITH ORDINALITY AS d (id, subject, description, unmet, n)
 ORDER BY d.n
RETURNING sequence, id
"""

INSERT_EDGES_SQL: Final = """
INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)
SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::integer[])
"""
