"""The PostgreSQL backend on its bad paths: what a hostile user or bad luck gives it.

A password in a `--store` value is never printed, whatever is wrong with the
value; a role the server refuses (no privilege to make the board, a read-only
role) is one coded refusal, never a driver traceback, with nothing changed; a
connect timeout the URL sets is the one used.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_cluster
import pytest
from store_backends import PostgresBoard

from agent17 import PostgresTaskStore, TaskError
from agent17.team.mailbox import MailboxError
from agent17.team.pg_mailbox import PostgresMailbox

WAIT_SECONDS = 60.0
SECRET = "sekret-7391"


@pytest.fixture
def board() -> Iterator[PostgresBoard]:
    made = PostgresBoard(pg_cluster.server())
    yield made
    made.close_all()


def agent17(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent17", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


# -- a password is never printed ---------------------------------------------------------------

UNREADABLE_VALUES = [
    f"host=db password={SECRET}",  # a libpq key=value string, not a URL
    f"mysql://db?password={SECRET}",
    f"postgresql://u:{SECRET}@[::1/db",  # libpq quotes the whole URL back
    f"postgresql://u:{SECRET}@[]/db",
    f"postgresql://u:{SECRET}@[::1]x/db",
    f"postgresql://u:{SECRET}%zz@h/db",  # libpq quotes the token it could not decode
]


@pytest.mark.parametrize("value", UNREADABLE_VALUES)
@pytest.mark.parametrize("command", ["board", "demo", "teammate"])
def test_a_store_value_that_cannot_be_read_is_refused_without_its_password(
    command: str, value: str, tmp_path: Path
) -> None:
    extra = ["--name", "alice"] if command == "teammate" else []
    done = agent17(command, "--store", value, *extra, "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    line = one_line(done)
    assert "store" in line and SECRET not in done.stdout + done.stderr, line
    assert not (tmp_path / ".agent_tutorial").exists()


def test_a_password_in_the_urls_query_is_not_printed_either(
    board: PostgresBoard, tmp_path: Path
) -> None:
    # An empty database: `agent17 board` says there is no board there, naming the URL.
    url = board.server.url(board.dbname) + "&" + urllib.parse.urlencode({"password": SECRET})
    done = agent17("board", "--store", url, cwd=tmp_path)
    assert done.returncode == 2
    line = one_line(done)
    assert "no task board in" in line and SECRET not in line, line


def test_a_connection_string_the_store_cannot_read_is_a_value_error_without_its_password() -> None:
    pytest.importorskip("psycopg")
    for value in UNREADABLE_VALUES[2:]:
        with pytest.raises(ValueError, match="connection string") as refused:
            PostgresTaskStore(value)
        assert SECRET not in str(refused.value), refused.value


# -- a role the server refuses -------------------------------------------------------------------


@pytest.fixture
def role(board: PostgresBoard) -> Iterator[str]:
    """A login role (with a password, so any server lets it in) that owns nothing."""
    name = f"agent17_test_role_{os.getpid()}"
    with board.server.admin() as connection:
        connection.execute(f"DROP ROLE IF EXISTS {name}")
        connection.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'role-pw'")
    yield name
    with board.server.admin() as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = %s",
            (name,),
        )
        connection.execute(f"REVOKE ALL ON DATABASE {board.dbname} FROM {name}")
    with board.server.admin(board.dbname) as connection:
        connection.execute(f"DROP OWNED BY {name}")
    with board.server.admin() as connection:
        connection.execute(f"DROP ROLE {name}")


def as_role(board: PostgresBoard, role: str) -> str:
    import psycopg

    return str(psycopg.conninfo.make_conninfo(board.dsn, user=role, password="role-pw"))


def url_of(dsn: str) -> str:
    import psycopg

    return "postgresql:///?" + urllib.parse.urlencode(psycopg.conninfo.conninfo_to_dict(dsn))


def schemas(board: PostgresBoard) -> list[Any]:
    with board.server.admin(board.dbname) as connection:
        return connection.execute("SELECT nspname FROM pg_namespace ORDER BY 1").fetchall()


def test_a_role_that_may_not_make_the_board_gets_a_coded_refusal_and_nothing_is_made(
    board: PostgresBoard, role: str, tmp_path: Path
) -> None:
    # A new role has no CREATE on the database (PostgreSQL 15 grants PUBLIC none).
    before = schemas(board)
    dsn = as_role(board, role)
    with pytest.raises(TaskError) as refused:
        PostgresTaskStore(dsn)
    assert refused.value.code == "store_unavailable"
    assert "permission denied" in refused.value.message and "role-pw" not in str(refused.value)
    with pytest.raises(MailboxError) as refused_mail:
        PostgresMailbox(dsn)
    assert refused_mail.value.code == "store_unavailable"
    url = url_of(dsn)
    for command in ("board", "demo"):
        done = agent17(command, "--store", url, "--workspace", str(tmp_path), cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        line = one_line(done)
        assert "store_unavailable" in line and "role-pw" not in line, line
    assert schemas(board) == before


def test_a_read_only_role_gets_a_coded_refusal_and_the_board_is_left_as_it_is(
    board: PostgresBoard, role: str
) -> None:
    store = board.raw_store()
    store.create_task("A")
    with board.server.admin() as connection:
        connection.execute(f"GRANT ALL ON DATABASE {board.dbname} TO {role}")
        connection.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
    with board.server.admin(board.dbname) as connection:
        connection.execute(f"GRANT ALL ON SCHEMA agent17 TO {role}")
        connection.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA agent17 TO {role}")
    # (This process has built the schema's reference already, so the open only reads.)
    read_only = PostgresTaskStore(as_role(board, role))
    try:
        for action in (lambda: read_only.create_task("B"), lambda: read_only.claim_next("bob")):
            with pytest.raises(TaskError) as refused:
                action()
            assert refused.value.code == "store_unavailable"
            assert "read-only" in refused.value.message
    finally:
        read_only.close()
    assert [t.subject for t in store.list_tasks()] == ["A"]


# -- connecting ---------------------------------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a server that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(WAIT_SECONDS)
    for connection in accepted:
        connection.close()
    listener.close()


def test_a_connect_timeout_the_url_sets_is_the_one_used(silent_port: int) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://u:{SECRET}@127.0.0.1:{silent_port}/db?connect_timeout=1"
    started = time.monotonic()
    with pytest.raises(TaskError) as refused:
        PostgresTaskStore(url)
    took = time.monotonic() - started
    assert refused.value.code == "store_unavailable" and SECRET not in str(refused.value)
    assert took < 5.0, f"{took:.1f} s: the URL's connect_timeout=1 was not used"


# -- another program's tables in the schema -----------------------------------------------------


def agent17_objects(board: PostgresBoard) -> list[Any]:
    with board.server.admin(board.dbname) as connection:
        return connection.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'agent17'::regnamespace ORDER BY 1"
        ).fetchall()


@pytest.mark.parametrize("command", ["demo", "teammate"])
def test_another_programs_messages_table_stops_the_team_before_a_board_is_made_beside_it(
    board: PostgresBoard, command: str, tmp_path: Path
) -> None:
    with board.server.admin(board.dbname) as connection:
        connection.execute("CREATE SCHEMA agent17")
        connection.execute("CREATE TABLE agent17.messages (id integer, text text)")
    extra = ["--name", "alice"] if command == "teammate" else []
    url = board.server.url(board.dbname)
    done = agent17(command, "--store", url, *extra, "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert "schema_version_mismatch" in one_line(done)
    # "nothing was changed": not even a board of ours in the other program's schema.
    assert agent17_objects(board) == [("messages",)]


# -- a password is never on a command line -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "public", "secret"),
    [
        ("postgresql://bob:s%40crit@db:5433/team", "postgresql://bob@db:5433/team", "s@crit"),
        ("postgresql://db/team?password=qu%3Dery&sslmode=disable",
         "postgresql://db/team?sslmode=disable", "qu=ery"),
        # libpq: the query's password wins over the userinfo's
        ("postgresql://bob:first@db/team?password=second", "postgresql://bob@db/team", "second"),
        ("postgresql://bob@db/team", "postgresql://bob@db/team", None),
        # no host in the authority (a Unix socket named in the query)
        ("postgresql:///team?host=%2Frun%2Fpg&password=pw", "postgresql:///team?host=%2Frun%2Fpg",
         "pw"),
    ],
)  # fmt: skip
def test_a_child_gets_the_url_without_its_password_and_the_password_in_its_environment(
    url: str, public: str, secret: str | None
) -> None:
    from agent17.team.workplace import parse_store_url

    shown, environment = parse_store_url(url).for_a_child()
    assert shown == public
    assert environment == ({} if secret is None else {"PGPASSWORD": secret})


def test_demo_teammate_processes_carry_no_password_on_their_command_line(
    board: PostgresBoard, tmp_path: Path
) -> None:
    from agent17.demo_processes import start_teammate

    with_password = f"{pg_cluster.server().url(board.dbname)}&password={SECRET}"
    process = start_teammate("alice", tmp_path, "--max-idle-polls", "1", store=with_password)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the server (trust) lets the child in without it
        assert "joined the team" in first, first
        # Read once it has joined: a read right after the start may come before the
        # kernel has laid out the new program's environment (and finds it empty).
        assert SECRET.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{process.pid}/environ")
        if os.geteuid() == 0:
            assert f"PGPASSWORD={SECRET}".encode() in environ.read_bytes().split(b"\0")
        else:  # the teammate is not dumpable from its start: its environment is root's to read
            with pytest.raises(PermissionError):
                environ.read_bytes()
    finally:
        process.kill()
        process.wait(WAIT_SECONDS)
        if process.stdout is not None:
            process.stdout.close()


# -- a connection that drops as soon as it is let in ------------------------------------------


@pytest.fixture
def drop_new_connections(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """The next connections are terminated by the server right after they are let in.

    Append to the list to arm one more drop; it fills with the backends terminated.
    Real terminations (pg_terminate_backend), so the first statement on the new
    session meets a dropped connection, as when a server goes down right then.
    """
    import psycopg

    real_connect = psycopg.connect
    armed: list[int] = []
    dropped: list[int] = []

    def connect_then_drop(*args: Any, **kwargs: Any) -> Any:
        connection = real_connect(*args, **kwargs)
        if armed:
            armed.pop()
            pid = connection.info.backend_pid
            with board.server.admin() as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
            dropped.append(pid)
        return connection

    monkeypatch.setattr(psycopg, "connect", connect_then_drop)
    yield armed
    assert not armed, "an armed drop never happened"
    armed.extend(dropped)  # for the test to read afterwards


def test_a_connection_dropped_while_it_is_set_up_is_made_again(
    board: PostgresBoard, drop_new_connections: list[int]
) -> None:
    store = PostgresTaskStore(board.dsn)
    try:
        task = store.create_task("A")
        (session,) = pg_cluster.backend_pids(board.dsn)
        with board.server.admin() as admin:  # dropped between operations: reconnected next
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (session,))
        drop_new_connections.append(1)  # and the new connection dies before its settings
        assert store.get_task(task.id).subject == "A"  # made again, within the reconnect time
        assert not drop_new_connections
        assert pg_cluster.backend_pids(board.dsn) not in ([], [session])
    finally:
        store.close()


def test_a_teammates_name_on_a_session_dropped_as_it_starts_is_a_coded_refusal(
    board: PostgresBoard, drop_new_connections: list[int]
) -> None:
    mailbox = PostgresMailbox(board.dsn)
    try:
        drop_new_connections.append(1)  # the name's own session: one attempt, no retry
        with pytest.raises(MailboxError) as refused:
            mailbox.hold_member("alice")
        assert refused.value.code == "store_unavailable"
        assert "lost" in refused.value.message
        assert not mailbox.member_is_held("alice")
        mailbox.hold_member("alice").release()  # and the name can be taken right after
    finally:
        mailbox.close()
