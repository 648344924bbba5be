"""The one choice of engine: a `--store` location and a workspace, opened into a TeamState.

Every command (run, demo, teammate, board) resolves its `--store` once, here;
what runs below holds the TeamState it was given and never asks which engine
it is on. The PostgreSQL modules are imported only for a PostgreSQL location,
so a team on the workspace's SQLite files never loads one.
"""

from __future__ import annotations

from pathlib import Path

from agent17.armour.whole_import import import_whole
from agent17.domain import Clock, IdFactory
from agent17.team.sqlite_state import SqliteTeam
from agent17.team.state import (
    BoardOptions,
    StoreLocation,
    StoreUrlError,
    TeamEngine,
    TeamState,
    parse_store_url,
    real_workspace,
)

__all__ = [
    "StoreLocation",
    "StoreUrlError",
    "TeamEngine",
    "TeamState",
    "open_team_state",
    "parse_store_url",
    "real_workspace",
    "team_engine",
]


def team_engine(location: StoreLocation) -> TeamEngine:
    """The engine that holds a team at `location`: the only place the engine is chosen."""
    if location.url is None:
        return SqliteTeam()
    # Imported on first use, and whole: a Ctrl-C during it must not break the next open.
    import_whole("agent17.team.pg_state")
    from agent17.team.pg_state import PostgresTeam

    return PostgresTeam(location)


def open_team_state(
    location: StoreLocation,
    workspace: Path,
    *,
    clock: Clock | None = None,
    new_task_id: IdFactory | None = None,
    new_claim_token: IdFactory | None = None,
    lease_seconds: float = 300.0,
) -> TeamState:
    """The team's board and mailbox at `location` (made on first use), opened together."""
    options = BoardOptions(clock, new_task_id, new_claim_token, lease_seconds)
    return team_engine(location).open(workspace, options)


def board_in_the_way(location: StoreLocation, workspace: Path | None) -> str | None:
    """Where a board already is that a demo must not write into (its ids are fixed), or None.

    No workspace means a fresh temporary one, which holds no board.
    """
    if workspace is None and not location.on_postgres:
        return None
    if not team_engine(location).board_exists(workspace or Path(".")):
        return None
    return location.shown() if location.on_postgres else str(workspace)
