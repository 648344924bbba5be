"""The exercise on the half-open lease: is it still live at `now`?

Checked against the reference on every case of a small complete space (`search`): nine
moments around each of three leases (one of whole minutes, two that start or end at a
fraction of a second), with each of the three datetimes written in UTC, Tokyo or New York
time. Cases in UTC come first, then one datetime in another zone, and so on, so the smallest
wrong case says which idea is missing: the half-open end, the fractions, or the offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import cache
from itertools import product
from typing import Final

from agent17.exercises.search import Answer, Search, listing, shown, value, wrong_kind

LeaseIsLive = Callable[[datetime, datetime, datetime], bool]


def lease_is_live_starter(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    """True if a lease [claimed_at, lease_expires_at) still holds at `now`."""
    return claimed_at <= now <= lease_expires_at


def lease_is_live_solution(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    """True if a lease [claimed_at, lease_expires_at) still holds at `now`."""
    # Half-open: the first instant is in, the expiry instant is already out. Aware
    # datetimes compare as instants, whatever their UTC offsets.
    return claimed_at <= now < lease_expires_at


LEASE_IS_LIVE_HINT = (
    "Draw the lease on a time line: is its first instant inside it? Its last? At"
    " lease_expires_at exactly, may bob take the task? And compare the instants themselves:"
    " two clocks in different time zones can show different text for the same moment."
)

_ZONES: Final[tuple[tuple[tzinfo, str], ...]] = (
    (UTC, "UTC"),
    (timezone(timedelta(hours=9)), "Tokyo time, UTC+9"),
    (timezone(timedelta(hours=-5)), "New York time, UTC-5"),
)
_NINE: Final = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
_TICK: Final = timedelta(microseconds=1)
_SECOND: Final = timedelta(seconds=1)
# (claimed_at, lease_expires_at) in UTC: whole seconds first, then fractions.
_LEASES: Final = (
    (_NINE, _NINE + timedelta(minutes=5)),
    (_NINE, _NINE + timedelta(seconds=0.25)),
    (_NINE + timedelta(seconds=0.75), _NINE + timedelta(minutes=5, seconds=0.25)),
)
# Where `now` is, from the start and the end of the lease; the order a failure is looked for.
_MOMENTS: Final[tuple[tuple[str, Callable[[datetime, datetime], datetime]], ...]] = (
    ("in the middle of the lease", lambda start, end: start + (end - start) / 2),
    ("at the claim instant itself", lambda start, end: start),
    ("at the expiry instant exactly", lambda start, end: end),
    ("one microsecond before the claim", lambda start, end: start - _TICK),
    ("one microsecond before the end", lambda start, end: end - _TICK),
    ("one microsecond after the claim", lambda start, end: start + _TICK),
    ("one microsecond after the end", lambda start, end: end + _TICK),
    ("a second before the claim", lambda start, end: start - _SECOND),
    ("a second after the end", lambda start, end: end + _SECOND),
)


@dataclass(frozen=True, slots=True)
class LeaseCase:
    """One question: the three datetimes, where `now` is, and which lease it is."""

    now: datetime
    claimed_at: datetime
    lease_expires_at: datetime
    moment: str
    fractional: bool


@cache
def lease_cases() -> tuple[LeaseCase, ...]:
    """Every case, smallest first: fewest datetimes outside UTC, then the lease, the moment."""
    keyed = []
    for lease_number, (start, end) in enumerate(_LEASES):
        for moment_number, (moment, at) in enumerate(_MOMENTS):
            for zones in product(range(len(_ZONES)), repeat=3):
                now, claimed_at, expires = (
                    instant.astimezone(_ZONES[zone][0])
                    for instant, zone in zip((at(start, end), start, end), zones, strict=True)
                )
                key = (sum(zone != 0 for zone in zones), lease_number, moment_number, zones)
                keyed.append((key, LeaseCase(now, claimed_at, expires, moment, lease_number > 0)))
    return tuple(case for _, case in sorted(keyed, key=lambda pair: pair[0]))


def _zone_name(instant: datetime) -> str:
    return next(name for zone, name in _ZONES if instant.utcoffset() == zone.utcoffset(None))


def _draw(case: LeaseCase) -> str:
    return listing(
        [
            ("now", f"{case.now.isoformat()}  ({_zone_name(case.now)}), {case.moment}"),
            ("claimed_at", f"{case.claimed_at.isoformat()}  ({_zone_name(case.claimed_at)})"),
            (
                "lease_expires_at",
                f"{case.lease_expires_at.isoformat()}  ({_zone_name(case.lease_expires_at)})",
            ),
        ]
    )


def _read(got: object, case: LeaseCase) -> Answer:
    if type(got) is not bool:
        return wrong_kind(f"return a bool (True or False), not {type(got).__name__}", shown(got))
    return value(got)


def _explain(case: LeaseCase, said: object, right: object) -> str:
    words = f"the lease is {'live' if right else 'over'} here, and you said {said}."
    zones = {_zone_name(when) for when in (case.now, case.claimed_at, case.lease_expires_at)}
    # Every case in UTC comes before any other, and whole seconds before fractions: so the
    # same moment in UTC, or on a whole-second lease, got the right answer already.
    if zones != {"UTC"}:
        others = " and ".join(sorted(zones - {"UTC"}))
        return (
            f"{words} The same instants written in UTC got the right answer from you: aware"
            f" datetimes compare as instants, whatever their UTC offsets ({others}). Compare"
            " the datetimes themselves, not their text or their fields."
        )
    if case.fractional:
        return (
            f"{words} The same moment on a lease of whole minutes got the right answer from"
            " you, but this lease starts or ends at a fraction of a second: compare the whole"
            " datetimes, microseconds included."
        )
    if case.moment == "at the expiry instant exactly":
        return (
            f"{words} The lease is over at its expiry instant: [claimed_at, lease_expires_at)"
            " is half-open."
        )
    if case.moment == "at the claim instant itself":
        return (
            f"{words} The claim instant is inside the lease: [claimed_at, lease_expires_at) is"
            " closed at its start."
        )
    if "before the claim" in case.moment:
        return f"{words} Before the claim the lease has not begun: look at both of its ends."
    return words


LEASE_SEARCH: Final = Search(
    space=lease_cases,
    ask=lambda candidate, case: candidate(case.now, case.claimed_at, case.lease_expires_at),
    read=_read,
    reference=lambda case: lease_is_live_solution(case.now, case.claimed_at, case.lease_expires_at),
    draw=_draw,
    explain=_explain,
    space_text=(
        "cases: nine moments around each of three leases (one of five minutes, two that start"
        " or end at a fraction of a second), each datetime in UTC, Tokyo or New York time"
    ),
    noun="case",
)

LEASE_IS_LIVE_CHECK: Final = LEASE_SEARCH.checker()
"""Compared with the half-open lease on every case of the space above."""
