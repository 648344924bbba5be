"""claim_one's answers, wrong and right, for the tests: the package's catalogue is the one list.

The tests (test_exercises.py, test_exercises_claims.py) and
benchmarks/exercise_reliability.py check these same functions.
"""

from __future__ import annotations

from wrong_claims import (
    PICK,
    TAKE,
    deferred_begin,
    gives_up_after_losing,
    ignores_the_rowcount,
    leaves_its_transaction_open,
    one_statement,
    select_then_update,
    takes_the_newest,
    through_a_cursor,
    two_transactions,
    under_a_thread_lock,
)

__all__ = [
    "PICK",
    "TAKE",
    "deferred_begin",
    "gives_up_after_losing",
    "ignores_the_rowcount",
    "leaves_its_transaction_open",
    "one_statement",
    "select_then_update",
    "takes_the_newest",
    "through_a_cursor",
    "two_transactions",
    "under_a_thread_lock",
]
