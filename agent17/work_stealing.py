"""WorkStealingRuntime: one store, one claim service, and the settings of idle scanning.

It is built once in the composition root and handed to the Lead, the one-shot
subagent and every teammate, so that all of them read and write one database.
The task tools are built from it (`tools/task_tools.py`); it knows no tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent17.claims import DirectTaskClaimService, LeasedTaskStore

DEFAULT_POLL_INTERVAL_SECONDS = 5.0
DEFAULT_MAX_IDLE_POLLS = 12


class WiringError(ValueError):
    """The parts were put together wrongly (two stores, wrong order, twice configured)."""


@dataclass(frozen=True, slots=True, init=False)
class WorkStealingRuntime:
    """The shared board of a team: store, claim service and poll settings."""

    store: LeasedTaskStore
    claim_service: DirectTaskClaimService
    poll_interval_seconds: float
    max_idle_polls: int

    def __init__(
        self,
        *,
        store: LeasedTaskStore,
        claim_service: DirectTaskClaimService | None = None,
        poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
        max_idle_polls: int = DEFAULT_MAX_IDLE_POLLS,
    ) -> None:
        service = claim_service if claim_service is not None else DirectTaskClaimService(store)
        # Catch "the Lead writes database A while teammates scan database B" at wiring time.
        if service.store is not store:
            raise WiringError("the claim service must use the very same store object")
        if poll_interval_seconds <= 0:
            raise WiringError("poll_interval_seconds must be positive")
        if max_idle_polls < 1:
            raise WiringError("max_idle_polls must be at least 1")
        object.__setattr__(self, "store", store)
        object.__setattr__(self, "claim_service", service)
        object.__setattr__(self, "poll_interval_seconds", float(poll_interval_seconds))
        object.__setattr__(self, "max_idle_polls", int(max_idle_polls))
