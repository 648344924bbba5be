"""A versioned schema file, and how to recognise a database that one created.

Each state file (board, mailbox, ledger) is made by one schema file shipped as
package data. Opening a file that already has content compares what SQLite
records about it with what the schema creates (`Schema.objects`), so a file
with a table dropped, an index missing or a trigger edited is refused rather
than used.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import cached_property
from importlib import resources

SchemaObject = tuple[str, str, str, str]
"""(type, name, table, sql) of one table, index or trigger, as sqlite_master lists it."""


@dataclass(frozen=True)
class Schema:
    """A versioned schema file: the SQL that creates a state database, and how to recognise one.

    `sql_file` is read as package data from `package`. Its metadata table holds
    one row `('schema_version', version)`; `what` names the database in messages.
    """

    package: str
    sql_file: str
    version: str
    metadata_table: str
    what: str

    @cached_property
    def sql(self) -> str:
        """The whole schema file."""
        return resources.files(self.package).joinpath(self.sql_file).read_text(encoding="utf-8")

    @cached_property
    def objects(self) -> frozenset[SchemaObject]:
        """Every table, index and trigger the schema creates, as SQLite records them."""
        reference = sqlite3.connect(":memory:")
        try:
            reference.executescript(self.sql)
            return frozenset(schema_objects(reference))
        finally:
            reference.close()


def schema_objects(connection: sqlite3.Connection) -> list[SchemaObject]:
    """The tables, indexes and triggers of the open database, without SQLite's own."""
    # SQLite's own tables (sqlite_sequence, sqlite_stat1 after ANALYZE) are not ours.
    rows = connection.execute(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
        " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]
