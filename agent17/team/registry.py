"""Who is on the team, across threads, processes and hosts: one live worker per name per board.

A teammate *joins* when its worker starts, in a thread of `agent17 run` or as
its own `agent17 teammate` process, and stays on the team (`active`) until the
shutdown handshake closes it. That state is a row in the team's database, so
the Lead in another process (or on another host) sees it too.

Whether a worker is alive right now cannot be a row: a process killed with
`kill -9` never gets to update it. So a worker holds a lock while it runs, one
that its engine drops when the process ends, however it ends: with SQLite a
lock file beside the mailbox (`teammate-<name>.lock`, see
`StateFile.hold_exclusive`), which the kernel drops; with PostgreSQL a
session-level advisory lock on a connection of the worker's own, which the
server drops when that session ends (team/pg_mailbox.py). A second worker with
the same name is refused while the first lives: duplicate names are how real
agent teams end up doing the same work twice. (A lock held by a live process is
the right tool for "is this worker alive"; it is the wrong one for claiming
tasks, where the choice of the first ready task and the update must be one
transaction.)
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from agent17.domain import ErrorCode, Refusal
from agent17.team.mailbox import MailboxError, NameHold, TeamMailbox

TEAMMATE_NAME: Final = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""A teammate name: lowercase, starts with a letter, then letters, digits, _ or -, max 32."""


class TeamCode(StrEnum):
    """The team's refusal codes: teammates' names, who exists, who may be written to."""

    INVALID_TEAMMATE_NAME = "invalid_teammate_name"
    TEAMMATE_EXISTS = "teammate_exists"
    UNKNOWN_TEAMMATE = "unknown_teammate"
    TEAMMATE_RUNNING = "teammate_running"
    TEAMMATE_NAME_LOST = "teammate_name_lost"
    TEAMMATE_CLOSED = "teammate_closed"
    INVALID_RECIPIENT = "invalid_recipient"
    UNKNOWN_RECIPIENT = "unknown_recipient"


class TeamError(Refusal):
    """A known refusal about teammates (bad or duplicate name, unknown recipient)."""

    def __init__(self, code: TeamCode, message: str) -> None:
        super().__init__(code, message)


def require_teammate_name(name: object, lead_name: str) -> str:
    """`name` if it can name a teammate (not the Lead), else TeamError `invalid_teammate_name`."""
    if not isinstance(name, str) or TEAMMATE_NAME.fullmatch(name) is None:
        raise TeamError(
            TeamCode.INVALID_TEAMMATE_NAME,
            f"{name!r} is not a teammate name: use lowercase letters, digits, _ or -,"
            " starting with a letter, at most 32 characters",
        )
    if name == lead_name:
        raise TeamError(TeamCode.INVALID_TEAMMATE_NAME, f"{name!r} is the Lead's name")
    return name


@dataclass(frozen=True, slots=True)
class Member:
    """One row of the team: a name, its state, and the process that last joined as it."""

    name: str
    state: str  # "active" or "closed"
    pid: int | None
    host: str


class Membership:
    """A live worker's hold on its name; `leave()` lets another worker take the name."""

    def __init__(self, name: str, hold: NameHold) -> None:
        self.name = name
        self._hold = hold

    def leave(self) -> None:
        """Release the name (idempotent); the row keeps its state."""
        self._hold.release()

    def ensure(self) -> None:
        """Refuse to go on (TeamError `teammate_name_lost`) once the hold is gone.

        A lock file is never taken from a live process; a PostgreSQL session can
        be (terminated by an administrator, cut off by the network), and then
        another worker may already have the name.
        """
        problem = self._hold.lost()
        if problem is not None:
            raise TeamError(
                TeamCode.TEAMMATE_NAME_LOST,
                f"teammate {self.name!r} lost its hold on its name ({problem});"
                " stopping, since another worker may have it now",
            )


class TeamRegistry:
    """The team's members, in the team database, and the locks of their live workers."""

    def __init__(self, mailbox: TeamMailbox) -> None:
        self.mailbox = mailbox

    def join(self, name: str) -> Membership:
        """Take `name` for this process's worker (active again if it was closed).

        Refused with TeamError `teammate_running` while another live worker holds it.
        """
        try:
            hold = self.mailbox.hold_member(name)
        except MailboxError as error:
            if error.code != ErrorCode.ALREADY_HELD:
                raise
            raise TeamError(
                TeamCode.TEAMMATE_RUNNING,
                f"teammate {name!r} is already running on this board{self._where(name)};"
                " one name, one worker",
            ) from None
        try:
            self.mailbox.transaction(
                lambda handle: handle.connection.execute(
                    "INSERT INTO teammates (name, state, pid, host) VALUES (?, 'active', ?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET state = 'active', pid = excluded.pid,"
                    " host = excluded.host",
                    (name, os.getpid(), socket.gethostname()),
                )
            )
        except BaseException:
            hold.release()
            raise
        return Membership(name, hold)

    def _where(self, name: str) -> str:
        member = self.member(name)
        if member is None or member.pid is None:
            return ""
        if member.host and member.host != socket.gethostname():
            return f" (pid {member.pid} on {member.host})"
        return f" (pid {member.pid})"

    def member(self, name: str) -> Member | None:
        """The row of `name`, or None if no worker ever joined as it."""
        row = self.mailbox.snapshot(
            lambda connection: connection.execute(
                "SELECT name, state, pid, host FROM teammates WHERE name = ?", (name,)
            ).fetchone()
        )
        return None if row is None else Member(*row)

    def members(self) -> list[Member]:
        """Every teammate that ever joined this board, by name."""
        rows = self.mailbox.snapshot(
            lambda connection: connection.execute(
                "SELECT name, state, pid, host FROM teammates ORDER BY name"
            ).fetchall()
        )
        return [Member(*row) for row in rows]

    def is_closed(self, name: str) -> bool:
        """True if `name` shut down through the handshake and has not joined again."""
        member = self.member(name)
        return member is not None and member.state == "closed"

    def is_live(self, name: str) -> bool:
        """True if a live worker holds `name` right now (in this process or another)."""
        return self.mailbox.member_is_held(name)
