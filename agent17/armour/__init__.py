"""The armour: what keeps the board safe against the world, apart from the lesson.

The lesson (store/, team/, tools/) enters each piece by one call and never
needs to read it:

- `StateFile` (state_file.py): how a SQLite state file is opened and each of
  its transactions guarded: the path checked against links and escapes
  (paths.py), a damaged or foreign file refused and left untouched
  (schema_file.py), a -wal that belongs to another file never replayed
  (wal_owner.py, wal_file.py, wal_advice.py, held_files.py), the file's
  identity checked in every transaction, a rollback that a second Ctrl-C
  cannot stop, a failing disk said as `store_unavailable` (file_failures.py);
- `PgDatabase` (pg_connection.py): PostgreSQL's connection, reconnected when
  the server dropped it, conflicts retried, a lost answer said as
  `store_unavailable` (pg_transaction.py), its schema created or checked
  (pg_schema.py);
- `ConfinedRoot` (confined.py): the one walk beneath a workspace that the
  file tools open paths with, which no symlink swapped in meanwhile redirects;
- `import_whole` (whole_import.py): a first import a Ctrl-C cannot leave half
  made; `hide_own_environment` (own_secrets.py): the `agent17` command's keys
  kept from its user's other processes.
"""
