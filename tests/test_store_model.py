"""The store against a tiny in-memory model: random operations, same answers, same errors."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from store_fixtures import ONE_MICROSECOND, ManualClock, new_store, task_id, token

from agent17 import SqliteTaskStore, TaskClaim, TaskError, TaskStatus

LEASE_SECONDS = 10.0
OWNERS = ("alice", "bob", "carol")
MISSING_ID = task_id(99_999)
NOT_CANONICAL = ("not-a-uuid", "{" + task_id(1) + "}", task_id(1).replace("-", ""))


@dataclass(frozen=True)
class ModelTask:
    id: str
    subject: str
    blocked_by: tuple[str, ...]
    status: TaskStatus = TaskStatus.PENDING
    owner: str | None = None
    token: str | None = None
    expires: datetime | None = None


class StoreModel:
    """The rules of the board in plain Python, with no persistence and no concurrency."""

    def __init__(self) -> None:
        self.tasks: dict[str, ModelTask] = {}  # insertion order is creation order
        self.issued: dict[str, tuple[str, str, datetime]] = {}  # token -> task, owner, expiry
        self.ids_drawn = 0
        self.tokens_drawn = 0
        self.events: Counter[tuple[str, str, str | None, str | None]] = Counter()

    def release(self, now: datetime) -> None:
        for task in list(self.tasks.values()):
            # Half-open lease: at the expiry instant it is over.
            if task.expires is not None and task.expires <= now:
                self.events[("lease_expired", task.id, task.owner, task.token)] += 1
                self.tasks[task.id] = replace(
                    task, status=TaskStatus.PENDING, owner=None, token=None, expires=None
                )

    def ready(self, task: ModelTask) -> bool:
        return task.status == TaskStatus.PENDING and all(
            self.tasks[dep].status == TaskStatus.COMPLETED for dep in task.blocked_by
        )

    def create(self, subject: str, deps: list[str], now: datetime) -> ModelTask | str:
        # Argument checks happen before the transaction: no id drawn, no release.
        if not subject.strip():
            return "invalid_task_input"
        if any(dep in NOT_CANONICAL for dep in deps) or len(set(deps)) != len(deps):
            return "invalid_task_input"
        self.release(now)
        self.ids_drawn += 1
        new_id = task_id(self.ids_drawn)
        if new_id in deps:
            return "invalid_task_input"
        if any(dep not in self.tasks for dep in deps):
            return "dependency_not_found"
        task = ModelTask(new_id, subject, tuple(deps))
        self.tasks[new_id] = task
        self.events[("created", new_id, None, None)] += 1
        return task

    def claim(self, target: ModelTask, owner: str, now: datetime) -> ModelTask:
        self.tokens_drawn += 1
        new_token = token(self.tokens_drawn)
        expires = now + timedelta(seconds=LEASE_SECONDS)
        claimed = replace(
            target, status=TaskStatus.IN_PROGRESS, owner=owner, token=new_token, expires=expires
        )
        self.tasks[target.id] = claimed
        self.issued[new_token] = (target.id, owner, expires)
        self.events[("claimed", target.id, owner, new_token)] += 1
        return claimed

    def claim_task(self, wanted: str, owner: str, now: datetime) -> ModelTask | str:
        if wanted in NOT_CANONICAL:
            return "invalid_task_input"
        self.release(now)
        target = self.tasks.get(wanted)
        if target is None:
            return "task_not_found"
        if target.status != TaskStatus.PENDING:
            return "task_not_claimable"
        if not self.ready(target):
            return "task_blocked"
        return self.claim(target, owner, now)

    def claim_next(self, owner: str, now: datetime) -> ModelTask | None:
        self.release(now)
        for task in self.tasks.values():
            if self.ready(task):
                return self.claim(task, owner, now)
        return None

    def complete(
        self, wanted: str, owner: str, claim_token: str, now: datetime
    ) -> tuple[ModelTask, tuple[str, ...]] | str:
        self.release(now)
        target = self.tasks.get(wanted)
        if target is None:
            return "task_not_found"
        if (
            target.status == TaskStatus.IN_PROGRESS
            and target.owner == owner
            and target.token == claim_token
        ):
            done = replace(target, status=TaskStatus.COMPLETED, token=None, expires=None)
            self.tasks[wanted] = done
            self.events[("completed", wanted, owner, claim_token)] += 1
            unblocked = tuple(
                t.id for t in self.tasks.values() if wanted in t.blocked_by and self.ready(t)
            )
            return done, unblocked
        if target.status == TaskStatus.COMPLETED:
            return "claim_mismatch"
        issued = self.issued.get(claim_token)
        if issued is not None and issued[:2] == (wanted, owner) and issued[2] <= now:
            return "lease_expired"
        return "claim_mismatch"


def _error_code(action: object) -> str:
    assert callable(action)
    try:
        action()
    except TaskError as error:
        return error.code
    raise AssertionError("expected a TaskError")


class StoreMatchesModel(RuleBasedStateMachine):
    """Random create / claim / complete / clock moves; the store must agree with the model."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="agent17-model-")
        self.clock = ManualClock()
        self.store: SqliteTaskStore = new_store(
            Path(self.folder), clock=self.clock, lease_seconds=LEASE_SECONDS
        )
        self.model = StoreModel()

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- choosing arguments ------------------------------------------------------

    def _some_id(self, data: st.DataObject) -> str:
        known = list(self.model.tasks)
        choices = [*known, MISSING_ID, NOT_CANONICAL[0]] if known else [MISSING_ID]
        return data.draw(st.sampled_from(choices), label="task_id")

    def _some_token(self, data: st.DataObject, wanted: str) -> str:
        current = self.model.tasks.get(wanted)
        choices = [token(99_999), *self.model.issued]
        if current is not None and current.token is not None:
            choices = [current.token, current.token, *choices]
        return data.draw(st.sampled_from(choices), label="claim_token")

    # -- rules ---------------------------------------------------------------------

    @rule(
        data=st.data(),
        subject=st.sampled_from(["T", "write docs", "", "   "]),
        twist=st.sampled_from(["none", "none", "none", "missing", "duplicate", "odd", "self"]),
    )
    def create(self, data: st.DataObject, subject: str, twist: str) -> None:
        known = list(self.model.tasks)
        deps: list[str] = []
        if known:
            deps = data.draw(
                st.lists(st.sampled_from(known), unique=True, max_size=3), label="deps"
            )
        if twist == "missing":
            deps.append(MISSING_ID)
        elif twist == "duplicate" and deps:
            deps.append(deps[0])
        elif twist == "odd":
            deps.append(data.draw(st.sampled_from(NOT_CANONICAL), label="odd id"))
        elif twist == "self":
            deps.append(task_id(self.model.ids_drawn + 1))  # the id this task would get
        expected = self.model.create(subject, deps, self.clock())
        if isinstance(expected, str):
            assert _error_code(lambda: self.store.create_task(subject, blocked_by=deps)) == expected
        else:
            created = self.store.create_task(subject, blocked_by=deps)
            assert (created.id, created.blocked_by, created.status) == (
                expected.id,
                expected.blocked_by,
                TaskStatus.PENDING,
            )

    @rule(data=st.data(), owner=st.sampled_from(OWNERS))
    def claim_task(self, data: st.DataObject, owner: str) -> None:
        wanted = self._some_id(data)
        expected = self.model.claim_task(wanted, owner, self.clock())
        if isinstance(expected, str):
            assert _error_code(lambda: self.store.claim_task(wanted, owner)) == expected
        else:
            self._check_claim(self.store.claim_task(wanted, owner), expected)

    @rule(owner=st.sampled_from(OWNERS))
    def claim_next(self, owner: str) -> None:
        expected = self.model.claim_next(owner, self.clock())
        claim = self.store.claim_next(owner)
        if expected is None:
            assert claim is None
        else:
            assert claim is not None
            self._check_claim(claim, expected)

    @rule(data=st.data(), owner=st.sampled_from(OWNERS))
    def complete(self, data: st.DataObject, owner: str) -> None:
        wanted = self._some_id(data)
        if wanted in NOT_CANONICAL:
            return  # covered by test_store_errors; here the model tracks valid calls
        holder = self.model.tasks.get(wanted)
        # Mostly the right owner, so that successes are common.
        if holder is not None and holder.owner is not None and data.draw(st.booleans()):
            owner = holder.owner
        claim_token = self._some_token(data, wanted)
        expected = self.model.complete(wanted, owner, claim_token, self.clock())
        if isinstance(expected, str):
            assert (
                _error_code(lambda: self.store.complete_task(wanted, owner, claim_token))
                == expected
            )
        else:
            done = self.store.complete_task(wanted, owner, claim_token)
            assert (done.task.status, done.task.owner) == (TaskStatus.COMPLETED, owner)
            assert done.unblocked == expected[1]

    @rule(data=st.data())
    def advance_clock(self, data: st.DataObject) -> None:
        expiries = sorted(
            t.expires
            for t in self.model.tasks.values()
            if t.expires is not None and t.expires > self.clock()
        )
        how = data.draw(st.sampled_from(["small", "lease", "exact", "just_before"]))
        if how in ("exact", "just_before") and expiries:
            target = data.draw(st.sampled_from(expiries), label="expiry")
            if how == "just_before":
                target -= ONE_MICROSECOND
            if target >= self.clock():
                self.clock.set(target)
        elif how == "lease":
            self.clock.advance(LEASE_SECONDS)
        else:
            self.clock.advance(data.draw(st.sampled_from([0.001, 1.0, 4.5])))

    # -- checks ---------------------------------------------------------------------

    def _check_claim(self, claim: TaskClaim, expected: ModelTask) -> None:
        assert claim.task.id == expected.id
        assert claim.task.owner == expected.owner
        assert claim.task.status == TaskStatus.IN_PROGRESS
        assert claim.claim_token == expected.token
        assert claim.lease_expires_at_utc == expected.expires

    @invariant()
    def board_matches_the_model(self) -> None:
        self.model.release(self.clock())
        board = self.store.list_tasks()
        assert [(t.id, t.subject, t.status, t.owner, t.blocked_by) for t in board] == [
            (t.id, t.subject, t.status, t.owner, t.blocked_by) for t in self.model.tasks.values()
        ]

    @invariant()
    def event_log_matches_the_model(self) -> None:
        logged = Counter(
            (e.kind.value, e.task_id, e.owner, e.claim_token) for e in self.store.events()
        )
        assert logged == self.model.events
        assert sorted(self.store.issued_claim_tokens()) == sorted(self.model.issued)


StoreMatchesModel.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreMatchesModel = StoreMatchesModel.TestCase
