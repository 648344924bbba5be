"""A versioned PostgreSQL schema file, and how an open creates it or checks it.

Under an advisory lock kept for schema changes: a PostgreSQL schema with none
of the file's objects gets the whole file in one transaction; one that has some
is checked: the version row first (another version, or tables of the same names
that are not ours: `schema_version_mismatch`), then every object the file makes,
compared with a reference built from the same file in a throwaway schema that
is rolled back (`store_unreadable` if one is missing or changed). A refused open
changes nothing. Objects of other files in the same PostgreSQL schema (the
mailbox's) are not this file's business.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Final

from agent17.armour.paths import RefusalFactory
from agent17.armour.pg_transaction import ConstraintViolation, PgTransaction
from agent17.domain import ErrorCode, Refusal

SCHEMA_CHANGE_LOCK: Final = (0x61673137, 0)  # 'ag17', 0: creating or checking a schema


@dataclass(frozen=True)
class PgSchema:
    """A versioned schema file for one PostgreSQL schema (`namespace`).

    `sql_file` is package data of `package`, written with unqualified names;
    its metadata table holds one row `('schema_version', version)`; `what`
    names the state in messages.
    """

    package: str
    sql_file: str
    version: str
    metadata_table: str
    what: str
    namespace: str = "agent17"

    @cached_property
    def sql(self) -> str:
        """The whole schema file."""
        return resources.files(self.package).joinpath(self.sql_file).read_text(encoding="utf-8")


# One row per object the schema owns, with its definition as the catalog prints it.
# search_path is the schema being described, so the definitions are unqualified.
_OBJECTS_SQL: Final = """
SELECT 'table', c.relname, string_agg(
         a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
         || ' ' || a.attidentity::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
         ', ' ORDER BY a.attnum)
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relnamespace = %(ns)s::regnamespace AND c.relkind IN ('r', 'p')
 GROUP BY c.relname
UNION ALL
SELECT 'relation', c.relname, c.relkind::text || ' ' || coalesce(pg_get_indexdef(i.indexrelid), '')
  FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid
 WHERE c.relnamespace = %(ns)s::regnamespace AND c.relkind NOT IN ('r', 'p')
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = %(ns)s::regnamespace
UNION ALL
SELECT 'trigger', t.tgname, pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'function', p.proname, pg_get_function_identity_arguments(p.oid) || ' '
       || p.prorettype::regtype::text || ' ' || p.provolatile::text || ' '
       || coalesce(array_to_string(p.proconfig, ','), '') || ' ' || p.prosrc
  FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace
"""

# The reference objects of each schema file, per server version (the catalog's
# printing of a definition may change between major versions).
_REFERENCES: dict[tuple[str, str, int], dict[tuple[str, str], str]] = {}
_REFERENCES_LOCK = threading.Lock()


STORE_NOT_FOUND: Final = ErrorCode.STORE_NOT_FOUND
"""The refusal code of an open that may not create the schema, when there is none."""


def open_schema(
    tx: PgTransaction,
    schema: PgSchema,
    refusal: RefusalFactory,
    where: str,
    *,
    create: bool = True,
) -> None:
    """Create `schema` in the database, or check the one there (see the module docstring).

    With `create=False` an absent schema is refused (`store_not_found`), nothing made.
    """
    tx.execute("SELECT pg_advisory_xact_lock(%s, %s)", SCHEMA_CHANGE_LOCK)
    reference = _reference(tx, schema)
    found = _objects(tx, schema.namespace, schema.namespace)
    ours = {key: found[key] for key in reference if key in found}
    if not ours and not create:
        raise refusal(STORE_NOT_FOUND, f"{where} schema {schema.namespace} holds no {schema.what}")
    if not ours:
        # The file whole, inside this transaction: a crash leaves no half schema.
        tx.execute(f"CREATE SCHEMA IF NOT EXISTS {plain_name(schema.namespace)}")
        tx.execute(f"SET LOCAL search_path = {plain_name(schema.namespace)}")
        tx.execute(schema.sql)
        return
    _verify(tx, schema, refusal, f"{where} schema {schema.namespace}", ours, reference)


def _verify(
    tx: PgTransaction,
    schema: PgSchema,
    refusal: RefusalFactory,
    where: str,
    ours: dict[tuple[str, str], str],
    reference: dict[tuple[str, str], str],
) -> None:
    if ("table", schema.metadata_table) not in ours:
        raise refusal(
            ErrorCode.SCHEMA_VERSION_MISMATCH,
            f"{where} has tables named like {schema.what}'s but no {schema.metadata_table},"
            " so they are not one; nothing was changed",
        )
    try:
        with tx.savepoint():
            row = tx.execute(
                f"SELECT value FROM {schema.metadata_table} WHERE key = 'schema_version'"
            ).fetchone()
    except Refusal as refused:
        if refused.code == ErrorCode.STORE_UNAVAILABLE:
            raise  # the server refused or cancelled the read: it says nothing of the table
        row = ("unreadable",)  # that name, but not ours (a column missing, ...)
    except (tx.driver_error, ConstraintViolation):  # that name, but not ours
        row = ("unreadable",)
    version = None if row is None else row[0]
    if version != schema.version:
        raise refusal(
            ErrorCode.SCHEMA_VERSION_MISMATCH,
            f"{where} has {schema.what} schema version {version!r}; this agent17 needs"
            f" {schema.version!r}. Nothing was changed.",
        )
    missing = sorted(name for key, name in _names(reference) if key not in ours)
    changed = sorted(name for key, name in _names(ours) if ours[key] != reference[key])
    if missing or changed:
        raise refusal(
            ErrorCode.STORE_UNREADABLE,
            f"{where} is not an intact {schema.what}: missing {missing or 'nothing'},"
            f" changed {changed or 'nothing'}; nothing was changed",
        )


def _objects(tx: PgTransaction, namespace: str, home: str) -> dict[tuple[str, str], str]:
    exists = tx.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (namespace,)).fetchone()
    if exists is None:
        return {}
    tx.execute(f"SET LOCAL search_path = {plain_name(namespace)}")
    own_name = re.compile(rf"\b{re.escape(namespace)}\b")
    rows = tx.execute(_OBJECTS_SQL, {"ns": namespace}).fetchall()
    tx.execute(f"SET LOCAL search_path = {plain_name(home)}")
    return {(kind, name): own_name.sub("<schema>", str(text)) for kind, name, text in rows}


def _reference(tx: PgTransaction, schema: PgSchema) -> dict[tuple[str, str], str]:
    """What the schema file makes, built in a throwaway schema and rolled back."""
    key = (schema.package, schema.sql_file, tx.server_version)
    with _REFERENCES_LOCK:
        if key in _REFERENCES:
            return _REFERENCES[key]
    scratch = f"agent17_reference_{secrets.token_hex(6)}"
    with tx.savepoint(rollback=True):
        tx.execute(f"CREATE SCHEMA {scratch}")
        tx.execute(f"SET LOCAL search_path = {scratch}")
        tx.execute(schema.sql)
        reference = _objects(tx, scratch, schema.namespace)
    with _REFERENCES_LOCK:
        _REFERENCES[key] = reference
    return reference


def plain_name(name: str) -> str:
    """`name` if it is a plain lowercase identifier (it is put into SQL text)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"not a plain PostgreSQL schema name: {name!r}")
    return name


def _names(objects: dict[tuple[str, str], str]) -> Iterator[tuple[tuple[str, str], str]]:
    for key in objects:
        yield key, f"{key[0]} {key[1]}"
