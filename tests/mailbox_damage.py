"""Plant mailbox rows that no mailbox writes, past the schema's checks, on either engine.

What a careless operator or a hostile user does with the engine's own tools:
on SQLite `PRAGMA ignore_check_constraints` (and, for a NULL, the schema text
edited through `writable_schema` for a moment); on PostgreSQL, as a superuser,
the CHECK constraints dropped for the write and put back, with the catalog set
so they read as valid again (`pg_constraint.convalidated`, `attnotnull`). Either
way the schema is afterwards exactly what the schema file makes, so a new
mailbox opens it as intact: only the row is wrong.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from team_backends import PostgresTeamPlace, SqliteTeamPlace, TeamPlace


class NotUtf8(bytes):
    """Bytes stored as a SQLite TEXT value that is not UTF-8 (SQLite does not check)."""


def good(**overrides: Any) -> dict[str, Any]:
    """A row a mailbox would write (a text message from the Lead to alice), with `overrides`."""
    row: dict[str, Any] = {
        "recipient": "alice",
        "sender": "lead",
        "kind": "text",
        "body": '{"content": "hello"}',
        "state": "queued",
        "deliveries": 0,
    }
    row.update(overrides)
    return row


def mailbox_file(place: SqliteTeamPlace) -> Path:
    return place.workspace / ".agent_tutorial" / "mailbox.sqlite3"


Where = tuple[str, Any] | None
"""(column, value) of the rows an UPDATE overwrites; None: INSERT one row."""


def plant(place: TeamPlace, values: dict[str, Any]) -> int:
    """Insert one message row with exactly `values`, past every check; its sequence."""
    return _past_checks(place, "messages", values, None)


def damage(place: TeamPlace, sequence: int, values: dict[str, Any]) -> None:
    """Overwrite columns of the stored message `sequence` with `values`, past every check."""
    _past_checks(place, "messages", values, ("sequence", sequence))


def damage_plans(place: TeamPlace, agent: str, values: dict[str, Any]) -> None:
    """Overwrite columns of `agent`'s stored plans with `values`, past every check."""
    _past_checks(place, "plans", values, ("agent", agent))


def _past_checks(place: TeamPlace, table: str, values: dict[str, Any], where: Where) -> int:
    if isinstance(place, SqliteTeamPlace):
        return _plant_sqlite(mailbox_file(place), table, values, where)
    return _plant_postgres(place, table, values, where)


MESSAGE_COLUMNS = ("sequence", "recipient", "sender", "kind", "body", "state", "deliveries")


def raw_messages(place: TeamPlace) -> list[dict[str, Any]]:
    """Every row of `messages` as stored (on SQLite each value with its storage class)."""
    return _raw(place, "messages")


def raw_dead_letters(place: TeamPlace) -> list[dict[str, Any]]:
    """Every row of `dead_letters` as stored, in the order they were set aside."""
    return _raw(place, "dead_letters")


def _raw(place: TeamPlace, table: str) -> list[dict[str, Any]]:
    if isinstance(place, SqliteTeamPlace):
        with _sqlite(mailbox_file(place)) as connection:
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            connection.text_factory = bytes  # every value as stored, readable or not
            typed = ", ".join(f"{column}, typeof({column})" for column in columns)
            rows = connection.execute(f"SELECT {typed} FROM {table} ORDER BY rowid").fetchall()
            return [
                {column: (row[2 * n], row[2 * n + 1]) for n, column in enumerate(columns)}
                for row in rows
            ]
    with _postgres(place) as connection:
        cursor = connection.execute(f"SELECT * FROM {table} ORDER BY 1")
        columns = [column.name for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


@contextlib.contextmanager
def _sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def _sqlite_value(value: Any) -> tuple[str, Any]:
    if isinstance(value, NotUtf8):
        return "CAST(? AS TEXT)", bytes(value)
    return "?", value


def _plant_sqlite(path: Path, table: str, values: dict[str, Any], where: Where) -> int:
    nulls = [column for column, value in values.items() if value is None]
    with _sqlite(path) as connection:
        (schema,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        if nulls:
            # NOT NULL is no CHECK: the pragma does not lift it, the schema text does.
            loose = schema
            for column in nulls:
                head, tail = loose.split(f"    {column} ", 1)
                loose = head + f"    {column} " + tail.replace("NOT NULL", "", 1)
            _set_schema(connection, table, loose)
    with _sqlite(path) as connection:
        connection.execute("PRAGMA ignore_check_constraints = ON")
        pieces = {column: _sqlite_value(value) for column, value in values.items()}
        parameters = [parameter for _, parameter in pieces.values()]
        if where is None:
            columns = ", ".join(pieces)
            marks = ", ".join(mark for mark, _ in pieces.values())
            (planted,) = connection.execute(
                f"INSERT INTO {table} ({columns}) VALUES ({marks}) RETURNING sequence", parameters
            ).fetchone()
        else:
            settings = ", ".join(f"{column} = {mark}" for column, (mark, _) in pieces.items())
            connection.execute(
                f"UPDATE {table} SET {settings} WHERE {where[0]} = ?", [*parameters, where[1]]
            )
            planted = 0
        if nulls:
            _set_schema(connection, table, schema)
    return int(planted)


def _set_schema(connection: sqlite3.Connection, table: str, sql: str) -> None:
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql, table))
    connection.execute("PRAGMA writable_schema = OFF")
    # The schema cookie moves on, so every open connection reads the schema text again.
    (cookie,) = connection.execute("PRAGMA schema_version").fetchone()
    connection.execute(f"PRAGMA schema_version = {int(cookie) + 1}")


@contextlib.contextmanager
def _postgres(place: PostgresTeamPlace) -> Iterator[Any]:
    with place.board.connection() as connection:
        yield connection


def _plant_postgres(
    place: PostgresTeamPlace, table: str, values: dict[str, Any], where: Where
) -> int:
    nulls = [column for column, value in values.items() if value is None]
    with _postgres(place) as connection, connection.transaction():
        checks = connection.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND contype = 'c'",
            (table,),
        ).fetchall()
        for name, _ in checks:
            connection.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        for column in nulls:
            connection.execute(f"ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL")
        if where is None:
            columns = ", ".join(values)
            marks = ", ".join(["%s"] * len(values))
            override = " OVERRIDING SYSTEM VALUE" if "sequence" in values else ""
            ((planted,),) = connection.execute(
                f"INSERT INTO {table} ({columns}){override} VALUES ({marks}) RETURNING sequence",
                list(values.values()),
            ).fetchall()
        else:
            settings = ", ".join(f"{column} = %s" for column in values)
            connection.execute(
                f"UPDATE {table} SET {settings} WHERE {where[0]} = %s",
                [*values.values(), where[1]],
            )
            planted = 0
        for name, definition in checks:
            connection.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition} NOT VALID")
        # Back as the schema file makes them, so the catalog reads as intact again.
        connection.execute(
            "UPDATE pg_constraint SET convalidated = true"
            " WHERE conrelid = %s::regclass AND contype = 'c'",
            (table,),
        )
        for column in nulls:
            connection.execute(
                "UPDATE pg_attribute SET attnotnull = true"
                " WHERE attrelid = %s::regclass AND attname = %s",
                (table, column),
            )
    return int(planted)
