"""The closing quiz: its key is what the package really does, its right choices cannot be told
by their length or place, and its marking never raises nor says which answers are wrong
before every question is answered."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from agent17.exercises import quiz
from agent17.exercises.quiz import QUIZ, Question, check_quiz
from agent17.team.teammate import TickKind, TickOutcome

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _right() -> dict[str, str]:
    return {question.key: question.answer for question in QUIZ}


def _wrong_letters(question: Question) -> list[str]:
    return [letter for letter in question.letters if letter != question.answer]


def _line(feedback: str, key: str) -> str:
    (line,) = [line for line in feedback.splitlines() if f". {key}:" in line]
    return line


@pytest.fixture(scope="module")
def key_once() -> dict[str, tuple[str, str]]:
    return QUIZ._checked_key()


@pytest.fixture
def known_key(monkeypatch: pytest.MonkeyPatch, key_once: dict[str, tuple[str, str]]) -> None:
    """Mark with the key found once, for tests about the marking rather than the package."""
    monkeypatch.setattr(QUIZ, "_checked_key", lambda: key_once)


def test_the_quiz_covers_the_chapter_in_course_order() -> None:
    assert 8 <= len(QUIZ) <= 10
    assert len(set(QUIZ.keys)) == len(QUIZ)
    notebooks = [question.notebook for question in QUIZ]
    assert notebooks == sorted(notebooks)
    for question in QUIZ:
        assert (NOTEBOOKS / f"{question.notebook}.ipynb").exists(), question.notebook
        assert 3 <= len(question.choices) <= 4, question.key
        assert question.answer in question.letters, question.key
        assert question.prompt.endswith("?"), question.key
        for choice in question.choices:
            assert choice.text and choice.why, question.key
            assert "  " not in choice.text + choice.why, question.key
        assert len({choice.text for choice in question.choices}) == len(question.choices)


@pytest.mark.parametrize("question", list(QUIZ), ids=lambda question: question.key)
def test_the_written_key_is_what_the_package_does(question: Question, tmp_path: Path) -> None:
    assert question.observe(tmp_path) == question.answer


def test_the_key_check_quiz_marks_with_is_found_by_running_the_package() -> None:
    key = QUIZ.answer_key()
    assert key == _right()


def test_the_key_follows_the_package_not_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # If a teammate claimed a ready task before reading its shutdown request, the quiz
    # would say so: the observation, not the written letter, decides.
    real_pass = quiz.real_pass

    def claims_first(case: Any, folder: Path) -> TickOutcome:
        if "shutdown_request" in case.mailbox:
            return TickOutcome("alice", TickKind.CLAIMED)
        return real_pass(case, folder)

    monkeypatch.setattr(quiz, "real_pass", claims_first)
    result = check_quiz(_right())
    assert not result.passed
    assert _line(result.feedback, "shutdown").startswith("9. shutdown: not a.")
    assert check_quiz({**_right(), "shutdown": "b"}).passed


def test_every_answer_right_passes() -> None:
    result = check_quiz(_right())
    assert result.passed, result.feedback
    assert result.feedback.splitlines()[0] == f"all {len(QUIZ)} right."
    for question in QUIZ:
        line = _line(result.feedback, question.key)
        assert line.endswith(question.choice(question.answer).why)
        assert ": right." in line


def test_one_wrong_answer_fails_and_says_why_that_answer_is_wrong() -> None:
    answers = {**_right(), "lease_instant": "a"}
    result = check_quiz(answers)
    assert not result.passed
    assert result.feedback.splitlines()[0] == f"{len(QUIZ) - 1} of {len(QUIZ)} right."
    line = _line(result.feedback, "lease_instant")
    assert line.startswith("5. lease_instant: not a. The lease is half-open")
    assert "[claimed_at, lease_expires_at)" in line
    assert ": right." in _line(result.feedback, "busy_handler")


@pytest.mark.usefixtures("known_key")
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_each_wrong_choice_has_its_own_feedback(rank: int) -> None:
    wrong = {
        question.key: _wrong_letters(question)[rank]
        for question in QUIZ
        if rank < len(_wrong_letters(question))
    }
    result = check_quiz({**_right(), **wrong})  # every question answered: each is marked
    assert not result.passed
    for key, letter in wrong.items():
        line = _line(result.feedback, key)
        assert f"{key}: not {letter}. {QUIZ[key].choice(letter).why}" in line


@pytest.mark.usefixtures("known_key")
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "not answered yet"),
        ("   ", "not answered yet"),
        ("e", "'e' is not one of the letters"),
        ("bc", "'bc' is not one of the letters"),
        ("the second one", "is not one of the letters"),
        (2, "answer with a letter as a string, not int"),
        (None, "answer with a letter as a string, not NoneType"),
        (["b"], "answer with a letter as a string, not list"),
    ],
)
def test_a_value_that_is_not_a_letter_is_feedback(value: object, said: str) -> None:
    result = check_quiz({**_right(), "fencing": value})  # type: ignore[dict-item]
    assert not result.passed
    line = _line(result.feedback, "fencing")
    assert said in line
    assert line.endswith("(choose a, b, c)")
    assert ": right." not in result.feedback  # one question unanswered: no verdicts yet


@pytest.mark.usefixtures("known_key")
def test_letters_are_read_the_way_students_write_them() -> None:
    answers = {**_right(), "busy_handler": " B) ", "flock": "A", "heartbeat": "d)"}
    assert check_quiz(answers).passed


@pytest.mark.usefixtures("known_key")
def test_unknown_keys_are_feedback_and_keep_the_quiz_unpassed() -> None:
    result = check_quiz({**_right(), "lease": "c", 7: "a"})  # type: ignore[dict-item]
    assert not result.passed
    last = result.feedback.splitlines()[-1]
    assert last.startswith("There is no question 'lease', 7; the keys are: busy_handler, flock")


def test_a_blank_sheet_is_not_answered_yet_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def must_not_run() -> None:
        raise AssertionError("a blank sheet needs no answer key")

    monkeypatch.setattr(QUIZ, "_checked_key", must_not_run)
    for sheet in ({}, QUIZ.blank(), {key: "  " for key in QUIZ.keys}):
        result = check_quiz(sheet)
        assert not result.passed
        assert result.feedback == (
            "not answered yet: write one letter for each question into the dict (for example"
            " 'busy_handler': 'a'), then run the check again."
        )
        assert str(result).startswith("NOT YET: not answered yet")


@pytest.mark.usefixtures("known_key")
def test_questions_left_blank_are_not_answered_yet() -> None:
    result = check_quiz({**QUIZ.blank(), "busy_handler": "b"})
    assert not result.passed
    assert result.feedback.splitlines()[0] == (
        f"1 of {len(QUIZ)} right so far. Answer every question to see which answers are"
        f" wrong; {len(QUIZ) - 1} still to answer:"
    )
    assert result.feedback.count("not answered yet") == len(QUIZ) - 1
    assert "busy_handler" not in result.feedback


@pytest.mark.usefixtures("known_key")
def test_until_every_question_is_answered_only_the_score_is_shown() -> None:
    wrong_first = {**_right(), "busy_handler": "a"}
    for answers in ({**wrong_first, "plan_gate": ""}, {**_right(), "plan_gate": "   "}):
        result = check_quiz(answers)
        assert not result.passed
        assert "busy_handler" not in result.feedback
        assert " right." not in result.feedback.split("\n", 1)[1]
        assert not any(f": not {letter}." in result.feedback for letter in "abcd")
        assert result.feedback.splitlines()[-1].startswith("10. plan_gate: not answered yet")
    assert check_quiz({**_right(), "plan_gate": ""}).feedback.startswith("9 of 10 right so far.")
    assert check_quiz({**wrong_first, "plan_gate": ""}).feedback.startswith("8 of 10 right so far.")
    # Once all ten have a letter, the wrong one is named, with why.
    marked = check_quiz(wrong_first).feedback
    assert marked.splitlines()[0] == "9 of 10 right."
    assert _line(marked, "busy_handler").startswith("1. busy_handler: not a. SQLite keeps no queue")


def _longest(question: Question) -> str:
    lengths = [len(choice.text) for choice in question.choices]
    return question.letters[lengths.index(max(lengths))]


def test_the_right_choice_cannot_be_told_by_its_length_or_its_place() -> None:
    assert sum(_longest(question) == question.answer for question in QUIZ) <= 3
    assert {question.answer for question in QUIZ} == set("abcd")


@pytest.mark.usefixtures("known_key")
def test_answering_by_length_or_by_place_does_not_pass() -> None:
    by_length = check_quiz({question.key: _longest(question) for question in QUIZ})
    assert int(by_length.feedback.split()[0]) <= 3, by_length.feedback
    for letter in "abc":
        assert not check_quiz({key: letter for key in QUIZ.keys}).passed


def test_the_questions_are_package_data() -> None:
    folder = Path(quiz.__file__).parent
    assert "## busy_handler" in (folder / "quiz.txt").read_text(encoding="utf-8")
    assert "## busy_handler" not in Path(quiz.__file__).read_text(encoding="utf-8")
    project = (folder.parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert '"exercises/*.txt"' in project
    assert len(QUIZ) == 10 and QUIZ.keys[0] == "busy_handler"


@pytest.mark.parametrize("answers", [None, ["b"], "b", 3])
def test_answers_that_are_not_a_mapping_are_feedback(answers: object) -> None:
    result = check_quiz(answers)  # type: ignore[arg-type]
    assert not result.passed
    assert result.feedback.startswith("pass a dict such as {'busy_handler': 'b', ...}, not ")


def test_a_package_run_that_breaks_keeps_the_written_key_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("race lab unavailable")

    monkeypatch.setattr(quiz, "run_json_race", broken)
    result = check_quiz(_right())
    assert result.passed
    line = _line(result.feedback, "one_statement")
    assert line.endswith("(the package could not re-check this one: race lab unavailable)")


def test_the_notebook_display_lists_every_question_and_choice_but_no_answer() -> None:
    text, page = str(QUIZ), QUIZ._repr_html_()
    assert repr(QUIZ) == text
    assert page.startswith("<div>") and page.endswith("</div>")
    assert page.count('<li style="margin-bottom: 0.5em"><code>') == len(QUIZ)
    for number, question in enumerate(QUIZ, start=1):
        assert f"{number}. [{question.key}] {question.prompt}" in text
        assert f"<code>{question.key}</code>" in page
        for letter, choice in zip(question.letters, question.choices, strict=True):
            assert f"   {letter}) {choice.text}" in text
            assert f"<b>{letter})</b> {html.escape(choice.text)}" in page
            assert choice.why not in text and choice.why not in page
    assert "<script" not in page
