"""A versioned schema file, and how to recognise a database that one created.

Each state file (board, mailbox, ledger) is made by one schema file shipped as
package data. Opening a file that already has content compares what SQLite
records about it with what the schema creates (`Schema.verify`, against
`Schema.objects`), so a file with a table dropped, an index missing or a
trigger edited is refused rather than used.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

from agent17.armour.file_failures import RefusalFactory
from agent17.domain import ErrorCode

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

    def verify(
        self, connection: sqlite3.Connection, path: Path, refusal: RefusalFactory, *, deep: bool
    ) -> None:
        """Refuse (left untouched) a database at `path` that this schema did not create.

        An empty one passes; `deep` adds SQLite's `quick_check` of every page.
        """
        found = frozenset(schema_objects(connection))
        if not found:
            return
        tables = {name for kind, name, _, _ in found if kind == "table"}
        if self.metadata_table not in tables:
            raise refusal(
                ErrorCode.SCHEMA_VERSION_MISMATCH,
                f"{path} is a SQLite database but not {self.what} (it has no"
                f" {self.metadata_table}); it was left untouched",
            )
        try:
            row = connection.execute(
                f"SELECT value FROM {self.metadata_table} WHERE key = 'schema_version'"
            ).fetchone()
        except sqlite3.OperationalError:  # a table of that name, but not ours
            row = ("unreadable",)
        version = None if row is None else row[0]
        if version != self.version:
            raise refusal(
                ErrorCode.SCHEMA_VERSION_MISMATCH,
                f"{path} has {self.what} schema version {version!r}; this agent17 needs"
                f" {self.version!r}. The file was left untouched.",
            )
        if found != self.objects:
            missing = sorted(name for _, name, _, _ in self.objects - found)
            extra = sorted(name for _, name, _, _ in found - self.objects)
            raise refusal(
                ErrorCode.STORE_UNREADABLE,
                f"{path} is not an intact {self.what}: missing or changed"
                f" {missing or 'nothing'}, unexpected {extra or 'nothing'}; it was left untouched",
            )
        if deep:
            problems = [str(line) for (line,) in connection.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise refusal(
                    ErrorCode.STORE_UNREADABLE,
                    f"{path} is damaged ({problems[0]}); it was left untouched",
                )


def schema_objects(connection: sqlite3.Connection) -> list[SchemaObject]:
    """The tables, indexes and triggers of the open database, without SQLite's own."""
    # SQLite's own tables (sqlite_sequence, sqlite_stat1 after ANALYZE) are not ours.
    rows = connection.execute(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
        " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]
