"""The classic wrong answers (and other right ones) to fenced_effect and append_note.

`wrong_claims.RACE_WRONG_ANSWERS` lists them, with the claim exercises' ones and the words
each one's feedback must contain.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Final

from agent17.domain import TaskClaim, TaskError, TaskStatus
from agent17.exercises._notes import NotesFile
from agent17.store.sqlite import SqliteTaskStore

Effect = Callable[[], None]

# -- fenced_effect --------------------------------------------------------------------------


# Trusts the claim it was handed: the board is never asked.
def trusts_its_memory(store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect) -> bool:
    if claim.task.owner == owner:
        effect()
        return True
    return False


# Asks the board, but lets its refusal escape as an error.
def lets_the_error_escape(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    store.verify_claim(claim.task.id, owner, claim.claim_token)
    effect()
    return True


# Compares the lease with its own clock, not the board's.
def uses_its_own_clock(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    if datetime.now(claim.lease_expires_at_utc.tzinfo) >= claim.lease_expires_at_utc:
        return False
    effect()
    return True


# Asks who holds the task and in which state, but not with which token.
def owner_and_status_only(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    task = store.get_task(claim.task.id)
    if task.owner != owner or task.status is not TaskStatus.IN_PROGRESS:
        return False
    effect()
    return True


# Runs the effect first and asks afterwards.
def fence_after_the_effect(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    effect()
    try:
        store.verify_claim(claim.task.id, owner, claim.claim_token)
    except TaskError:
        return False
    return True


# Asks the board and then ignores its answer.
def verifies_but_runs_anyway(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    with contextlib.suppress(TaskError):
        store.verify_claim(claim.task.id, owner, claim.claim_token)
    effect()
    return True


# Asks only who holds the task.
def checks_only_the_owner(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    if store.get_task(claim.task.id).owner != owner:
        return False
    effect()
    return True


# -- append_note -----------------------------------------------------------------------------


# Locks the write but not the read: the text it writes back can be old already.
def locks_only_the_write(notes: NotesFile, line: str) -> None:
    text = notes.read()
    with notes.lock():
        notes.write(text + line + "\n")


# Locks the read but writes after letting go.
def locks_only_the_read(notes: NotesFile, line: str) -> None:
    with notes.lock():
        text = notes.read()
    notes.write(text + line + "\n")


# Takes the lock twice: once to read, once to write; someone can come between.
def locks_read_and_write_apart(notes: NotesFile, line: str) -> None:
    with notes.lock():
        text = notes.read()
    with notes.lock():
        notes.write(text + line + "\n")


# Writes only its own line: the file is replaced by it.
def writes_only_its_line(notes: NotesFile, line: str) -> None:
    notes.write(line + "\n")


# Appends without the newline.
def forgets_the_newline(notes: NotesFile, line: str) -> None:
    notes.append(line)


# Appends its line twice.
def appends_twice(notes: NotesFile, line: str) -> None:
    notes.append(line + "\n")
    notes.append(line + "\n")


_ONE_PROCESS_LOCK: Final = threading.Lock()


# A threading.Lock: it keeps out the threads of one process, not other teammates.
def under_a_thread_lock(notes: NotesFile, line: str) -> None:
    with _ONE_PROCESS_LOCK:
        notes.write(notes.read() + line + "\n")


# Right: O_APPEND adds the line in one system call.
def appends(notes: NotesFile, line: str) -> None:
    notes.append(line + "\n")
