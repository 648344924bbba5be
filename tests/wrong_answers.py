"""The classic wrong answers a class writes, per exercise, each with the feedback it must get.

    from wrong_answers import WRONG_ANSWERS

    for wrong in WRONG_ANSWERS["claim_one"]:
        print(wrong.label, check("claim_one", wrong.candidate))

Every entry must fail its check on every run, with feedback containing its
`fragment` (a checker that lets one through now and then would teach the
wrong lesson). The catalogue tests the checkers; it is not what they run:
a checker searches for the counterexample. The tests run the whole catalogue
every time, and benchmarks/exercise_reliability.py runs it many times and
counts. `RIGHT_ANSWERS` holds answers other than the reference solution that
must pass. The functions are in wrong_pure.py (each with its mistake in a
comment above it); the race exercises' catalogue is wrong_claims.RACE_WRONG_ANSWERS
(its functions in wrong_claims.py and wrong_effects.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import wrong_graphs as graphs
import wrong_paths as paths
import wrong_pure as pure
from wrong_claims import RACE_RIGHT_ANSWERS, RACE_WRONG_ANSWERS


@dataclass(frozen=True, slots=True)
class WrongAnswer:
    """A wrong answer: what it gets wrong, the function, and words its feedback must contain."""

    label: str
    candidate: Callable[..., Any]
    fragment: str


W = WrongAnswer


def _race(name: str) -> tuple[WrongAnswer, ...]:
    return tuple(W(*entry) for entry in RACE_WRONG_ANSWERS[name])


WRONG_ANSWERS: Final[Mapping[str, tuple[WrongAnswer, ...]]] = {
    "ready_in_order": (
        W("sorts by id", pure.sorted_by_id, "never sort by id"),
        W("in progress counts as done", pure.in_progress_counts_as_done, "pending is not enough"),
        W("only tasks without dependencies", pure.no_dependencies_only, "B is ready too"),
        W("the last dependency decides", pure.last_dependency_decides, "C is not ready"),
        W(
            "one completed dependency is enough",
            pure.one_completed_dependency_is_enough,
            "not ready",
        ),
        W("looks only at the first dependency", pure.first_dependency_only, "C is not ready"),
        W("not completed is ready", pure.not_completed_is_ready, "only pending tasks"),
        W("only the first ready task", pure.only_the_first, "B is ready too"),
        W("newest first", pure.newest_first, "keep creation order"),
        W("returns the Tasks", pure.returns_the_tasks, "not the Task itself"),
        W("returns the subjects", pure.returns_the_subjects, "not their subjects"),
        W("an answer that equals anything", pure.equals_anything, "return a list of ids"),
        W("patches the checker", pure.patches_the_checker, "A is ready too"),
    ),
    "claim_query": (
        W("forgets unmet", pure.forgets_unmet, "unmet = 0"),
        W("every ready row", pure.every_ready_row, "one row only"),
        W("the last one", pure.the_last_one, "the first ready task is 1"),
        W("defeats the index", pure.defeats_the_index, "work_ready"),
        W("no ORDER BY: the index's order", pure.unordered_limit_one, "reverse_unordered_selects"),
        W("not a SELECT", pure.not_a_select, "one SELECT"),
        W("no such table", pure.no_such_table, "refused"),
        W("in progress too", pure.in_progress_too, "no ready task"),
        W("unmet below two", pure.unmet_below_two, "no ready task"),
        W("a range on unmet", pure.range_on_unmet, "sorts every matching row"),
        W("LIKE, not equality", pure.like_instead_of_equality, "reads the whole table"),
        W("a hard-coded id", pure.hard_coded_id, "returned [(15013,)]"),
        W("OFFSET 1", pure.offset_one, "the first ready task is 1"),
        W("the whole row", pure.whole_row, "returned [(1, 'pending', 0)]"),
        W("the query in a list", pure.query_in_a_list, "return the text of one SELECT"),
    ),
    "lease_is_live": (
        W("closed interval", pure.closed_interval, "half-open"),
        W("open interval", pure.open_interval, "closed at its start"),
        W("compares text", pure.compares_text, "whatever their UTC offsets"),
        W("forgets the start", pure.forgets_the_start, "before the claim"),
        W("drops the offsets", pure.drops_the_offsets, "whatever their UTC offsets"),
        W("whole seconds", pure.whole_seconds, "a fraction of a second"),
        W("clock fields", pure.compares_clock_fields, "microseconds included"),
        W("answers 1 or 0", pure.answers_with_a_number, "return a bool"),
        W("an answer that equals anything", pure.always_equal, "return a bool"),
    ),
    "take_if_pending": _race("take_if_pending"),
    "claim_one": _race("claim_one"),
    "inside_workspace": (
        W("by text only", paths.by_text_only, "out is a symlink to ../outside"),
        W("`..` by text, then the links", paths.normalises_before_resolving, "normpath knows no"),
        W("compares text prefixes", paths.compares_text_prefixes, "starts with the same letters"),
        W("forgets hard links", paths.forgets_hard_links, "(a hard link)"),
        W("counts the names of folders", paths.counts_the_names_of_folders, "A folder is never"),
        W("refuses every symlink", paths.refuses_every_symlink, "which stays inside"),
        W("refuses every `..`", paths.refuses_every_parent, "climbs back"),
    ),
    "fenced_effect": _race("fenced_effect"),
    "next_pass": (
        W("work first", pure.work_first, "mailbox comes before"),
        W("ignores the plan gate", pure.ignores_the_gate, "before claim_next"),
        W("newest message first", pure.newest_message_first, "oldest message decides"),
        W("the board before the plan gate", pure.board_before_the_gate, "whether or not a task"),
        W("the plan gate before the mailbox", pure.gate_before_the_mailbox, "mailbox comes before"),
        W("a rejected plan passes", pure.rejected_plan_passes, "pending or rejected"),
        W("any plan blocks", pure.any_plan_blocks, "an approved plan, or none"),
        W("every message is protocol", pure.every_message_is_protocol, "a text is message_handled"),
        W("claims the last ready task", pure.claims_the_last, "first ready task"),
    ),
    "wait_or_wake": (
        W("busy-waits", pure.busy_waits, "keeps asking instead of sleeping"),
        W("checks once, then sleeps", pure.checks_once, "went on waiting"),
        W("upside down", pure.upside_down, "say True when woken"),
        W("sleeps in slices of 0.8 s", pure.sleeps_in_slices_of_08, "went on waiting"),
        W("sleeps in slices of 0.3 s", pure.sleeps_in_slices_of_03, "went on waiting"),
        W("forgets to return", pure.forgets_to_return, "you returned None"),
    ),
    "task_graph": (
        W("one after the other", graphs.one_after_the_other, "which it does not need"),
        W("no dependencies", graphs.no_dependencies, "api can start before schema"),
        W("subjects as ids", graphs.subjects_as_ids, "ids that create_task returned"),
        W("the tasks as ids", graphs.tasks_as_ids, "ids that create_task returned"),
        W(
            "release waits for the last only",
            graphs.release_waits_for_the_last_only,
            "page needs mockups",
        ),
        W("the tests wait for the api", graphs.tests_wait_for_the_api, "tests waits for api"),
        W("forgets a task", graphs.forgets_the_fixtures, "'fixtures' is not on your board"),
        W("one dependency twice", graphs.one_dependency_twice, "names the same task twice"),
    ),
    "append_note": _race("append_note"),
}
"""Each exercise's classic wrong answers, in course order."""

RIGHT_ANSWERS: Final[Mapping[str, tuple[Callable[..., Any], ...]]] = {
    "ready_in_order": (pure.asks_is_ready,),
    "claim_query": (pure.min_of_the_ready,),
    "lease_is_live": (pure.compares_timestamps, pure.in_utc),
    "inside_workspace": (paths.with_realpath,),
    "next_pass": (pure.by_table,),
    "wait_or_wake": (pure.sleeps_in_short_slices,),
    "task_graph": (graphs.release_waits_for_all,),
    **RACE_RIGHT_ANSWERS,
}
"""Answers other than the reference solution that must pass."""
