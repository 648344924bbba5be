"""PostgresTaskStore: the same leased task board, in a PostgreSQL database many hosts share.

The board's operations are TaskBoard's (board.py); the engine under them is
pg_engine.py (the board lock, one clock, one message per operation). The board
lives in its own PostgreSQL schema, `agent17`, in the database the DSN names:
it never meets an application's own `tasks` in `public`, and the team's
mailbox lives beside it under its own version row (team/pg_mailbox.py).
"""

from __future__ import annotations

from datetime import timedelta

from agent17.domain import Clock, IdFactory, check_lease_seconds
from agent17.store.board import TaskBoard
from agent17.store.pg_engine import PostgresEngine


class PostgresTaskStore(TaskBoard):
    """The chapter's leased task board in the `agent17` schema of a PostgreSQL database."""

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
        create: bool = True,
    ) -> None:
        lease = timedelta(seconds=check_lease_seconds(lease_seconds))  # before connecting
        # create=False: open a board that exists, or refuse (`store_not_found`), making nothing.
        self._postgres = PostgresEngine(dsn, clock, create=create)
        super().__init__(
            self._postgres, lease=lease, new_task_id=new_task_id, new_claim_token=new_claim_token
        )
        self._clock = clock
        self._db = self._postgres.db
        self.where: str = self._postgres.where

    def seconds_to_next_lease_expiry(self) -> float | None:
        """How long until the first lease now held runs out, on the board's clock (None: none).

        The board's clock is the injected one, or else the server's: a waiter on any
        host compares the deadline with the clock that will judge it, never its own.
        """
        if self._clock is None:
            return self._postgres.seconds_left()
        deadline = self.next_lease_expiry()
        return None if deadline is None else (deadline - self._clock()).total_seconds()
