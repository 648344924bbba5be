"""Ctrl-C at many moments of a process's FIRST PostgreSQL open, then a second open.

Run as a script: `python pg_first_import_worker.py DSN NAME MOMENTS`, NAME being
`PostgresTaskStore` or `PostgresMailbox` (agent17's names loaded on first use).
This process imports agent17 but never the PostgreSQL modules or psycopg: every
trial is a fork of it, so each one's open is a real first import.

A trial counts the events of a trace function (calls, lines, returns: importlib's
own frames included) through `agent17.<NAME>(DSN)` and, at its moment, raises
SIGINT in the process (Python runs the handler there, as after a real Ctrl-C).
Then it opens again in the same process. A calibration trial with no moment
counts one whole first open; the moments sweep its first 95 percent (the rest,
the connect and the schema check, is tests/pg_interrupt_workers.py's).

Prints one JSON list: per moment, whether the signal was raised, how the first
open ended ("opened", "interrupted" or the error) and how the second did.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback
from types import FrameType
from typing import Any

import agent17

SWEPT_PERCENT = 95


def _describe(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(error)).strip()[-500:]


def _trial(dsn: str, name: str, moment: int) -> dict[str, Any]:
    """One first open with SIGINT at event `moment` (0: never), then a second open."""
    events = 0
    raised = False

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal events, raised
        events += 1
        if events == moment:
            raised = True
            signal.raise_signal(signal.SIGINT)
        return trace

    sys.settrace(trace)
    try:
        getattr(agent17, name)(dsn).close()
        first = "opened"
    except KeyboardInterrupt:
        first = "interrupted"
    except BaseException as error:
        first = _describe(error)
    finally:
        sys.settrace(None)
    try:
        getattr(agent17, name)(dsn).close()
        second = "opened"
    except BaseException as error:
        second = _describe(error)
    return {"moment": moment, "events": events, "raised": raised, "first": first, "second": second}


def _forked_trial(dsn: str, name: str, moment: int) -> dict[str, Any]:
    """`_trial` in a fork of this process, whose modules are as `import agent17` left them."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            os.write(writer, json.dumps(_trial(dsn, name, moment)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return dict(json.loads(answer))


def main(dsn: str, name: str, moments: int) -> None:
    """Calibrate, then one trial per moment; print the trials as JSON."""
    assert "psycopg" not in sys.modules and "agent17.store.postgres" not in sys.modules
    assert threading.active_count() == 1  # a fork copies one thread only
    whole = _forked_trial(dsn, name, 0)
    assert (whole["first"], whole["second"]) == ("opened", "opened"), whole
    swept = whole["events"] * SWEPT_PERCENT // 100
    trials = [_forked_trial(dsn, name, 1 + swept * i // moments) for i in range(moments)]
    print(json.dumps(trials))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
