"""Bodies of team tests that must run in a "spawn" child process (importable by name)."""

from __future__ import annotations

import os
import signal
from typing import Any

from agent17.team.mailbox import Mailbox

WAIT_SECONDS = 60.0


def claim_mail_through_an_interrupt(
    workspace: str, wakeup_fifo: str, ready: Any, go_on: Any, results: Any
) -> None:
    """Claim mail while the parent holds the mailbox's write lock; SIGINT lands in the wait.

    `signal.set_wakeup_fd` writes a byte from the C-level handler, so the parent
    knows the signal arrived before Python raises KeyboardInterrupt (which it
    does only once the lock wait returns).
    """
    mailbox = Mailbox(workspace)
    fifo = os.open(wakeup_fifo, os.O_WRONLY | os.O_NONBLOCK)
    signal.set_wakeup_fd(fifo)
    ready.set()
    try:
        mailbox.claim("alice")
    except KeyboardInterrupt:
        results.put(("interrupted", None))
    else:
        results.put(("not interrupted", None))
    signal.set_wakeup_fd(-1)
    if not go_on.wait(WAIT_SECONDS):
        return
    envelope = mailbox.claim("alice")  # the very same object, after the interrupt
    results.put(("claimed", None if envelope is None else envelope.body))
    mailbox.close()
