"""A child process that opens a PostgreSQL board while Ctrl-C lands at many moments.

Run in a "spawn" child (a plain module, so the child can import it by name).
Each run opens `PostgresTaskStore(dsn)` while a helper thread sends SIGINT to
the main thread after that run's delay: the delays sweep the whole open
(connect, session settings, the schema check and its savepoints), so the
interrupt lands in libpq calls, between them and in Python code. A run ends as
"opened" (the signal came too late), "interrupted", or anything else, which is
the bug. After every run, a session of the test's own polls the server (with a
deadline) until the run left no session and no lock behind.
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections import Counter
from typing import Any

from store_workers import ResultQueue

from agent17 import PostgresTaskStore
from agent17.armour import pg_schema

APPLICATION = "agent17"
"""The application_name of every session a store opens."""
LEFT_BEHIND_SECONDS = 10.0

LEFT_BEHIND_SQL = """
SELECT (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = %(app)s),
       (SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
         WHERE a.datname = current_database() AND a.application_name = %(app)s)
"""


class _Interrupter:
    """Sends SIGINT to the main thread `delay` seconds after `go`, unless `disarm` comes first.

    A signal that arrives once its run is over is ignored: it belongs to no run.
    """

    def __init__(self) -> None:
        self._run = 0
        self._target = -1
        self.armed = False
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.armed and self._target == self._run:
            raise KeyboardInterrupt

    def arm(self, delay: float) -> threading.Thread:
        """Ready the next run's signal; `go` starts its clock."""
        self._run += 1
        run, main = self._run, threading.main_thread().ident
        assert main is not None
        self._go, self._cancel = go, cancel = threading.Event(), threading.Event()

        def fire() -> None:
            go.wait()
            if not cancel.wait(delay):
                self._target = run
                signal.pthread_kill(main, signal.SIGINT)

        thread = threading.Thread(target=fire, daemon=True)
        thread.start()
        return thread

    def go(self) -> None:
        self.armed = True
        self._go.set()

    def disarm(self) -> None:
        self.armed = False
        self._cancel.set()
        self._go.set()


def open_under_interrupts(
    dsn: str, checker_dsn: str, runs: int, fresh_reference: bool, results: ResultQueue
) -> None:
    """Open the board `runs` times, the delays sweeping one open's length (measured first).

    Reports ("done", {outcome: count}, an example of each bad outcome).
    """
    import psycopg

    outcomes: Counter[str] = Counter()
    examples: dict[str, str] = {}
    try:
        interrupter = _Interrupter()
        checker = psycopg.connect(checker_dsn, autocommit=True, application_name="checker")
        took = []
        PostgresTaskStore(dsn).close()  # the first open of a process builds the reference
        for _ in range(5):
            if fresh_reference:
                pg_schema._REFERENCES.clear()
            started = time.monotonic()
            PostgresTaskStore(dsn).close()
            took.append(time.monotonic() - started)
        span = sorted(took)[2]  # the median: one slow open must not stretch the sweep
        for run in range(runs):
            delay = span * run / runs
            if fresh_reference:
                # Build the schema's reference again: its throwaway savepoint is in the check.
                pg_schema._REFERENCES.clear()
            store = None
            thread = interrupter.arm(delay)
            try:
                try:
                    interrupter.go()
                    store = PostgresTaskStore(dsn)
                    outcome = "opened"
                finally:
                    interrupter.disarm()
            except KeyboardInterrupt:
                outcome = "interrupted"
            except BaseException as error:
                outcome = f"{type(error).__module__}.{type(error).__qualname__}"
                examples.setdefault(outcome, f"after {delay:.4f} s: {traceback.format_exc()}")
            thread.join()
            if store is not None:
                store.close()
            outcomes[outcome] += 1
            left = _left_behind(checker)
            if left != (0, 0):
                outcomes["left a session or a lock behind"] += 1
                examples.setdefault("left", f"after {delay:.4f} s: {left} (sessions, locks)")
        checker.close()
        results.put(("done", dict(outcomes), examples))
    except BaseException:
        results.put(("error", {}, {"traceback": traceback.format_exc()}))
        raise


def _left_behind(checker: Any) -> tuple[int, int]:
    """Sessions and locks of stores still on the server, once they had time to go."""
    deadline = time.monotonic() + LEFT_BEHIND_SECONDS
    while True:
        ((sessions, locks),) = checker.execute(LEFT_BEHIND_SQL, {"app": APPLICATION}).fetchall()
        if (sessions, locks) == (0, 0) or time.monotonic() > deadline:
            return int(sessions), int(locks)
        time.sleep(0.002)
