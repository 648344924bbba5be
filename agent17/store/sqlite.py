"""SqliteTaskStore: the leased task board on one SQLite file, safe across processes.

Why alice and bob can never both own C: looking for a ready task and taking
it happen in a single `BEGIN IMMEDIATE` transaction. That statement asks for
SQLite's write lock before the first read, so whoever is second waits (up to
the busy timeout) and then reads a board that already shows the first claim.
Every operation that may write, reads included, goes through this one helper.

Each transaction first returns expired leases to pending (S8), then runs the
operation inside a savepoint: a refused or failed operation is rolled back
whole (no half claim), while the lease releases it found still commit.

Durability: `synchronous=FULL`. In WAL mode NORMAL is also crash-safe for
the file, but a power cut could forget the last committed claims, and a
forgotten claim is a task that two workers may both run. FULL makes each
commit durable for roughly 0.1 ms of fsync here (about 6k claims/s on one
core, far more than a team of agents needs). See README.md, "Durability".
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Final, TypeVar

from agent17.domain import (
    Clock,
    ErrorCode,
    EventKind,
    IdFactory,
    Task,
    TaskClaim,
    TaskCompletion,
    TaskError,
    TaskEvent,
    TaskStatus,
    is_canonical_uuid,
    require_utc,
    utc_now,
)
from agent17.store.connection import BUSY_TIMEOUT_SECONDS, open_state_database, use_wal
from agent17.store.paths import TASK_DB_NAME, check_state_file, safe_state_file

SCHEMA_VERSION: Final = 1
SQLITE_HEADER: Final = b"SQLite format 3\x00"
_DB_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"

# The claim query. Served by the tasks_ready index: a seek to the first
# (pending, 0 unmet) entry, so its cost does not grow with the board.
CLAIM_NEXT_SQL: Final = (
    "SELECT sequence FROM tasks"
    " WHERE status = 'pending' AND unmet_dependencies = 0"
    " ORDER BY sequence LIMIT 1"
)
# After a completion: a dependent whose stored count disagrees with its edges
# (missing or newer dependencies count as unfinished), or that has a bad edge.
_DEPENDENT_DRIFT_SQL: Final = (
    "SELECT t.id FROM tasks AS t"
    " WHERE t.sequence IN (SELECT task_sequence FROM task_dependencies"
    " WHERE dependency_sequence = ?)"
    " AND (t.unmet_dependencies != (SELECT count(*) FROM task_dependencies AS d"
    " LEFT JOIN tasks AS x ON x.sequence = d.dependency_sequence"
    " WHERE d.task_sequence = t.sequence AND x.status IS NOT 'completed')"
    " OR EXISTS (SELECT 1 FROM task_dependencies AS d"
    " WHERE d.task_sequence = t.sequence AND d.dependency_sequence >= t.sequence))"
    " LIMIT 1"
)
_TASK_COLUMNS: Final = "sequence, id, subject, description, status, owner, unmet_dependencies"

T = TypeVar("T")
_Row = tuple[int, str, str, str, str, str | None, int]


def _db_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_DB_TIME_FORMAT)


def _parse_db_time(text: str) -> datetime:
    return datetime.strptime(text, _DB_TIME_FORMAT).replace(tzinfo=UTC)


def _random_uuid() -> str:
    return str(uuid.uuid4())


def _corrupted(message: str) -> TaskError:
    return TaskError(ErrorCode.GRAPH_CORRUPTED, message)


def _invalid(message: str) -> TaskError:
    return TaskError(ErrorCode.INVALID_TASK_INPUT, message)


def _require_task_id(task_id: object) -> str:
    if not is_canonical_uuid(task_id):
        raise _invalid(f"task id must be a canonical UUID (lowercase, hyphenated): {task_id!r}")
    assert isinstance(task_id, str)
    return task_id


def _require_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner.strip():
        raise _invalid(f"owner must be a non-empty name: {owner!r}")
    return owner


def _schema_sql() -> str:
    return resources.files("agent17.store").joinpath("schema.sql").read_text(encoding="utf-8")


class SqliteTaskStore:
    """The chapter's leased task board in `<workspace>/.agent_tutorial/tasks.sqlite3`."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
    ) -> None:
        if not isinstance(lease_seconds, int | float) or not math.isfinite(lease_seconds):
            raise ValueError(f"lease_seconds must be a finite number: {lease_seconds!r}")
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive: {lease_seconds!r}")
        self._clock: Clock = clock if clock is not None else utc_now
        self._new_task_id: IdFactory = new_task_id if new_task_id is not None else _random_uuid
        self._new_claim_token: IdFactory = (
            new_claim_token if new_claim_token is not None else _random_uuid
        )
        self.lease = timedelta(seconds=float(lease_seconds))
        self.path: Path = safe_state_file(workspace, TASK_DB_NAME)
        self.workspace: Path = self.path.parent.parent
        self._lock = threading.Lock()
        self._connection = self._open()

    # -- opening -----------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        before = check_state_file(self.path, self.workspace)
        if before is not None and before.st_size > 0:
            with open(self.path, "rb") as handle:
                header = handle.read(len(SQLITE_HEADER))
            if header != SQLITE_HEADER:
                # Not ours and not even SQLite: "another schema" in the widest sense.
                raise TaskError(
                    ErrorCode.SCHEMA_VERSION_MISMATCH,
                    f"{self.path} exists but is not a SQLite database; it was left untouched",
                )
            # Check the version on a read-only connection: closing a read-write
            # one would checkpoint a crashed writer's WAL into the main file.
            probe = sqlite3.connect(
                f"{self.path.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_SECONDS
            )
            try:
                self._check_schema_version(probe, allow_empty=True)
            finally:
                probe.close()
        connection = open_state_database(self.path, self.workspace)
        try:
            # Read-only version check first: a foreign or newer file stays byte-identical.
            self._check_schema_version(connection, allow_empty=True)
            use_wal(connection)
            self._create_schema(connection)
            self._check_schema_version(connection, allow_empty=False)
        except BaseException:
            connection.close()
            raise
        return connection

    def _check_schema_version(self, connection: sqlite3.Connection, *, allow_empty: bool) -> None:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
        if not tables and allow_empty:
            return
        if "task_metadata" not in tables:
            raise TaskError(
                ErrorCode.SCHEMA_VERSION_MISMATCH,
                f"{self.path} is a SQLite database but not an agent17 task board"
                " (no task_metadata); it was left untouched",
            )
        row = connection.execute(
            "SELECT value FROM task_metadata WHERE key = 'schema_version'"
        ).fetchone()
        found = None if row is None else row[0]
        if found != str(SCHEMA_VERSION):
            raise TaskError(
                ErrorCode.SCHEMA_VERSION_MISMATCH,
                f"{self.path} has schema version {found!r}; this agent17 needs "
                f"{SCHEMA_VERSION!r}. The file was left untouched.",
            )

    def _create_schema(self, connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(_schema_sql()):
                connection.execute(statement)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; the file stays for the next store."""
        with self._lock:
            self._connection.close()

    def __enter__(self) -> SqliteTaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the one transaction helper -------------------------------------------------

    def _now(self) -> datetime:
        return require_utc(self._clock())

    def _transact(self, operation: Callable[[sqlite3.Connection, datetime], T]) -> T:
        """Run `operation` in BEGIN IMMEDIATE after releasing expired leases.

        A TaskError rolls the operation back to its savepoint and commits the
        releases; any other exception rolls everything back.
        """
        with self._lock:
            connection = self._connection
            connection.execute("BEGIN IMMEDIATE")
            try:
                # Read the clock only once we hold the write lock, so time
                # moves in the same order as the transactions commit.
                now = self._now()
                self._release_expired(connection, now)
                connection.execute("SAVEPOINT operation")
                try:
                    result = operation(connection, now)
                except TaskError:
                    connection.execute("ROLLBACK TO operation")
                    connection.execute("RELEASE operation")
                    connection.execute("COMMIT")
                    raise
                connection.execute("RELEASE operation")
                connection.execute("COMMIT")
                return result
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _release_expired(self, connection: sqlite3.Connection, now: datetime) -> None:
        # Half-open lease [claimed_at, expires_at): at the expiry instant it is over.
        expired = connection.execute(
            "SELECT sequence, owner, claim_token FROM tasks"
            " WHERE status = 'in_progress' AND lease_expires_at_utc <= ?",
            (_db_time(now),),
        ).fetchall()
        for sequence, owner, token in expired:
            connection.execute(
                "UPDATE tasks SET status = 'pending', owner = NULL, claim_token = NULL,"
                " claimed_at_utc = NULL, lease_expires_at_utc = NULL WHERE sequence = ?",
                (sequence,),
            )
            self._append_event(connection, now, EventKind.LEASE_EXPIRED, sequence, owner, token)

    @staticmethod
    def _append_event(
        connection: sqlite3.Connection,
        now: datetime,
        kind: EventKind,
        task_sequence: int,
        owner: str | None = None,
        claim_token: str | None = None,
    ) -> None:
        connection.execute(
            "INSERT INTO task_events (at_utc, kind, task_sequence, owner, claim_token)"
            " VALUES (?, ?, ?, ?, ?)",
            (_db_time(now), kind.value, task_sequence, owner, claim_token),
        )

    # -- reading rows ------------------------------------------------------------------

    @staticmethod
    def _row_by_id(connection: sqlite3.Connection, task_id: str) -> _Row:
        row = connection.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        return row  # type: ignore[no-any-return]

    @staticmethod
    def _dependencies(
        connection: sqlite3.Connection, sequence: int
    ) -> list[tuple[str, TaskStatus]]:
        """The dependencies of one task in the order given, checked edge by edge."""
        rows = connection.execute(
            "SELECT d.dependency_sequence, t.id, t.status FROM task_dependencies AS d"
            " LEFT JOIN tasks AS t ON t.sequence = d.dependency_sequence"
            " WHERE d.task_sequence = ? ORDER BY d.position",
            (sequence,),
        ).fetchall()
        edges = []
        for dependency_sequence, dependency_id, status in rows:
            _check_edge(sequence, dependency_sequence, dependency_id)
            edges.append((dependency_id, TaskStatus(status)))
        return edges

    @staticmethod
    def _task_from_row(row: _Row, blocked_by: Iterable[str]) -> Task:
        _, task_id, subject, description, status, owner, _ = row
        return Task(task_id, subject, description, TaskStatus(status), owner, tuple(blocked_by))

    def _load_task(self, connection: sqlite3.Connection, row: _Row) -> Task:
        edges = self._dependencies(connection, row[0])
        return self._task_from_row(row, (dependency_id for dependency_id, _ in edges))

    def _ready_check(
        self, connection: sqlite3.Connection, row: _Row
    ) -> tuple[tuple[str, ...], list[str]]:
        """All dependency ids and the unfinished ones; the stored count must agree."""
        edges = self._dependencies(connection, row[0])
        unfinished = [dep for dep, status in edges if status != TaskStatus.COMPLETED]
        if len(unfinished) != row[6]:
            raise _corrupted(
                f"task {row[1]} records {row[6]} unmet dependencies but its edges show "
                f"{len(unfinished)}"
            )
        return tuple(dep for dep, _ in edges), unfinished

    # -- public operations -----------------------------------------------------------

    def create_task(
        self,
        subject: str,
        description: str = "",
        blocked_by: Sequence[str] | Iterable[str] = (),
    ) -> Task:
        """Add a pending task; `blocked_by` names existing tasks that must complete first."""
        if not isinstance(subject, str) or not subject.strip():
            raise _invalid("subject must be a non-empty string")
        if not isinstance(description, str):
            raise _invalid("description must be a string")
        if isinstance(blocked_by, str | bytes) or not isinstance(blocked_by, Iterable):
            raise _invalid("blocked_by must be a list of task ids")
        dependencies = tuple(_require_task_id(dep) for dep in blocked_by)
        if len(set(dependencies)) != len(dependencies):
            raise _invalid("blocked_by names the same task twice")

        def create(connection: sqlite3.Connection, now: datetime) -> Task:
            task_id = self._new_task_id()
            if not is_canonical_uuid(task_id):
                raise ValueError(f"new_task_id returned a non-canonical UUID: {task_id!r}")
            if task_id in dependencies:
                raise _invalid(f"task {task_id} cannot depend on itself")
            found = {
                dep_id: (sequence, status)
                for sequence, dep_id, status in connection.execute(
                    "SELECT sequence, id, status FROM tasks WHERE id IN"
                    f" ({','.join('?' * len(dependencies))})",
                    dependencies,
                )
            }
            missing = [dep for dep in dependencies if dep not in found]
            if missing:
                raise TaskError(
                    ErrorCode.DEPENDENCY_NOT_FOUND,
                    f"blocked_by names tasks that do not exist: {', '.join(missing)}",
                )
            unmet = sum(1 for _, status in found.values() if status != TaskStatus.COMPLETED)
            try:
                cursor = connection.execute(
                    "INSERT INTO tasks (id, subject, description, status, unmet_dependencies)"
                    " VALUES (?, ?, ?, 'pending', ?)",
                    (task_id, subject, description, unmet),
                )
            except sqlite3.IntegrityError as error:
                raise _invalid(f"a task with id {task_id} already exists") from error
            sequence = cursor.lastrowid
            assert sequence is not None
            connection.executemany(
                "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
                " VALUES (?, ?, ?)",
                [(sequence, found[dep][0], position) for position, dep in enumerate(dependencies)],
            )
            self._append_event(connection, now, EventKind.CREATED, sequence)
            return Task(task_id, subject, description, TaskStatus.PENDING, None, dependencies)

        return self._transact(create)

    def get_task(self, task_id: str) -> Task:
        """One task by id."""
        _require_task_id(task_id)
        return self._transact(
            lambda connection, now: self._load_task(
                connection, self._row_by_id(connection, task_id)
            )
        )

    def list_tasks(self) -> list[Task]:
        """Every task in creation order; the whole graph is checked on the way."""
        return self._transact(lambda connection, now: _load_board(connection))

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        _require_task_id(task_id)
        _require_owner(owner)

        def claim(connection: sqlite3.Connection, now: datetime) -> TaskClaim:
            row = self._row_by_id(connection, task_id)
            if row[4] != TaskStatus.PENDING:
                held = f" by {row[5]}" if row[5] else ""
                raise TaskError(
                    ErrorCode.TASK_NOT_CLAIMABLE, f"task {task_id} is {row[4]}{held}, not pending"
                )
            blocked_by, unfinished = self._ready_check(connection, row)
            if unfinished:
                raise TaskError(
                    ErrorCode.TASK_BLOCKED,
                    f"task {task_id} waits for unfinished tasks: {', '.join(unfinished)}",
                )
            return self._claim(connection, now, row, owner, blocked_by)

        return self._transact(claim)

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        _require_owner(owner)

        def claim(connection: sqlite3.Connection, now: datetime) -> TaskClaim | None:
            found = connection.execute(CLAIM_NEXT_SQL).fetchone()
            if found is None:
                return None
            row = connection.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE sequence = ?", found
            ).fetchone()
            # The count said ready (0); _ready_check raises graph_corrupted unless the
            # edges agree, so past this line every dependency is completed.
            blocked_by, _ = self._ready_check(connection, row)
            return self._claim(connection, now, row, owner, blocked_by)

        return self._transact(claim)

    def _claim(
        self,
        connection: sqlite3.Connection,
        now: datetime,
        row: _Row,
        owner: str,
        blocked_by: tuple[str, ...],
    ) -> TaskClaim:
        token = self._new_claim_token()
        if not is_canonical_uuid(token):
            raise ValueError(f"new_claim_token returned a non-canonical UUID: {token!r}")
        expires = now + self.lease
        try:
            connection.execute(
                "INSERT INTO task_claim_tokens"
                " (token, task_sequence, owner, claimed_at_utc, lease_expires_at_utc)"
                " VALUES (?, ?, ?, ?, ?)",
                (token, row[0], owner, _db_time(now), _db_time(expires)),
            )
        except sqlite3.IntegrityError as error:
            raise TaskError(
                ErrorCode.CLAIM_TOKEN_COLLISION,
                f"claim token {token} was issued before; the claim was rolled back",
            ) from error
        updated = connection.execute(
            "UPDATE tasks SET status = 'in_progress', owner = ?, claim_token = ?,"
            " claimed_at_utc = ?, lease_expires_at_utc = ?"
            " WHERE sequence = ? AND status = 'pending' AND owner IS NULL"
            " AND unmet_dependencies = 0",
            (owner, token, _db_time(now), _db_time(expires), row[0]),
        ).rowcount
        if updated != 1:  # cannot happen under BEGIN IMMEDIATE; refuse rather than guess
            raise TaskError(ErrorCode.TASK_NOT_CLAIMABLE, f"task {row[1]} is no longer pending")
        self._append_event(connection, now, EventKind.CLAIMED, row[0], owner, token)
        task = Task(row[1], row[2], row[3], TaskStatus.IN_PROGRESS, owner, blocked_by)
        return TaskClaim(task, token, _parse_db_time(_db_time(expires)))

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        _require_task_id(task_id)
        _require_owner(owner)
        if not is_canonical_uuid(claim_token):
            raise _invalid(f"claim token must be a canonical UUID: {claim_token!r}")

        def complete(connection: sqlite3.Connection, now: datetime) -> TaskCompletion:
            row = self._row_by_id(connection, task_id)
            updated = connection.execute(
                "UPDATE tasks SET status = 'completed', claim_token = NULL,"
                " claimed_at_utc = NULL, lease_expires_at_utc = NULL"
                " WHERE sequence = ? AND status = 'in_progress' AND owner = ?"
                " AND claim_token = ?",
                (row[0], owner, claim_token),
            ).rowcount
            if updated != 1:
                raise self._completion_refusal(connection, now, row, owner, claim_token)
            self._append_event(connection, now, EventKind.COMPLETED, row[0], owner, claim_token)
            try:
                dependents = connection.execute(
                    "UPDATE tasks SET unmet_dependencies = unmet_dependencies - 1"
                    " WHERE sequence IN (SELECT task_sequence FROM task_dependencies"
                    " WHERE dependency_sequence = ?)"
                    " RETURNING sequence, id, status, unmet_dependencies",
                    (row[0],),
                ).fetchall()
            except sqlite3.IntegrityError as error:
                raise _corrupted(
                    f"completing {task_id} would push a dependent's unmet count below zero"
                ) from error
            broken = connection.execute(_DEPENDENT_DRIFT_SQL, (row[0],)).fetchone()
            if broken is not None:
                # An inflated count would hide a ready task from claim_next forever.
                raise _corrupted(
                    f"task {broken[0]}'s unmet dependency count disagrees with its edges"
                )
            unblocked = tuple(
                dependent_id
                for _, dependent_id, status, unmet in sorted(dependents)
                if unmet == 0 and status == TaskStatus.PENDING
            )
            task = self._load_task(
                connection, (row[0], row[1], row[2], row[3], "completed", owner, 0)
            )
            return TaskCompletion(task, unblocked)

        return self._transact(complete)

    @staticmethod
    def _completion_refusal(
        connection: sqlite3.Connection, now: datetime, row: _Row, owner: str, token: str
    ) -> TaskError:
        """Why a completion was refused: the caller's lease ran out, or it never held this one."""
        if row[4] == TaskStatus.COMPLETED:
            return TaskError(
                ErrorCode.CLAIM_MISMATCH, f"task {row[1]} is already completed by {row[5]}"
            )
        issued = connection.execute(
            "SELECT task_sequence, owner, lease_expires_at_utc FROM task_claim_tokens"
            " WHERE token = ?",
            (token,),
        ).fetchone()
        if issued is not None and issued[0] == row[0] and issued[1] == owner:
            expired_at = _parse_db_time(issued[2])
            if expired_at <= now:
                current = f"; it is now held by {row[5]}" if row[5] else ""
                return TaskError(
                    ErrorCode.LEASE_EXPIRED,
                    f"the lease on task {row[1]} expired at {issued[2]}{current}",
                )
        return TaskError(
            ErrorCode.CLAIM_MISMATCH,
            f"task {row[1]} is not in progress for {owner} with that claim token",
        )

    # -- the event log and introspection --------------------------------------------

    def events(self, after_sequence: int = 0) -> list[TaskEvent]:
        """The append-only event log, oldest first, after the given event sequence."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT e.sequence, e.kind, t.id, e.at_utc, e.owner, e.claim_token"
                " FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
                " WHERE e.sequence > ? ORDER BY e.sequence",
                (after_sequence,),
            ).fetchall()
        return [
            TaskEvent(seq, EventKind(kind), task_id, _parse_db_time(at), owner, token)
            for seq, kind, task_id, at, owner, token in rows
        ]

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token this database has issued, in issue order."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT token FROM task_claim_tokens ORDER BY rowid"
            ).fetchall()
        return [token for (token,) in rows]

    @property
    def total_changes(self) -> int:
        """Rows this store instance has changed since it opened (proves "zero writes")."""
        with self._lock:
            return self._connection.total_changes

    def explain_claim_next(self) -> list[str]:
        """SQLite's query plan for the claim query, one line per step."""
        with self._lock:
            rows = self._connection.execute(f"EXPLAIN QUERY PLAN {CLAIM_NEXT_SQL}").fetchall()
        return [str(row[3]) for row in rows]


def _check_edge(task_sequence: int, dependency_sequence: int, dependency_id: str | None) -> None:
    if dependency_id is None:
        raise _corrupted(f"a dependency of task #{task_sequence} points at a missing task")
    if dependency_sequence == task_sequence:
        raise _corrupted(f"task {dependency_id} depends on itself")
    if dependency_sequence > task_sequence:
        raise _corrupted(
            f"task #{task_sequence} depends on the newer task {dependency_id}:"
            " a dependency must be older, or cycles become possible"
        )


def _load_board(connection: sqlite3.Connection) -> list[Task]:
    rows: list[_Row] = connection.execute(
        f"SELECT {_TASK_COLUMNS} FROM tasks ORDER BY sequence"
    ).fetchall()
    by_sequence = {row[0]: row for row in rows}
    edges: dict[int, list[int]] = {row[0]: [] for row in rows}
    for task_sequence, dependency_sequence in connection.execute(
        "SELECT task_sequence, dependency_sequence FROM task_dependencies"
        " ORDER BY task_sequence, position"
    ):
        if task_sequence not in by_sequence:
            raise _corrupted(f"a dependency row belongs to the missing task #{task_sequence}")
        dependency = by_sequence.get(dependency_sequence)
        _check_edge(
            task_sequence, dependency_sequence, None if dependency is None else dependency[1]
        )
        edges[task_sequence].append(dependency_sequence)
    tasks = []
    for row in rows:
        unfinished = sum(1 for dep in edges[row[0]] if by_sequence[dep][4] != TaskStatus.COMPLETED)
        if unfinished != row[6]:
            raise _corrupted(
                f"task {row[1]} records {row[6]} unmet dependencies but its edges show {unfinished}"
            )
        blocked_by = (by_sequence[dep][1] for dep in edges[row[0]])
        tasks.append(SqliteTaskStore._task_from_row(row, blocked_by))
    return tasks


def _split_sql(script: str) -> list[str]:
    """Split the schema file into statements (triggers keep their inner semicolons)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.lstrip().startswith("--") and not pending:
            continue
        pending += line + "\n"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements
