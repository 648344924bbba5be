"""Pictures for the chapter notebooks: the board DAG, the event-log replay, the lease timeline.

A student does not need to read this package: each notebook cell calls one
function here and gets one picture.
"""

from agent17.viz.approvals import ButtonApprover
from agent17.viz.dag import (
    STYLES,
    active_leases,
    board_digraph,
    board_dot,
    board_table,
    display_state,
    short_id,
)
from agent17.viz.replay import board_at, describe_event, replay_slider
from agent17.viz.stepper import TeamStepper
from agent17.viz.timeline import LeaseBar, LeaseTimeline, lease_timeline

__all__ = [
    "STYLES",
    "ButtonApprover",
    "LeaseBar",
    "LeaseTimeline",
    "TeamStepper",
    "active_leases",
    "board_at",
    "board_digraph",
    "board_dot",
    "board_table",
    "describe_event",
    "display_state",
    "lease_timeline",
    "replay_slider",
    "short_id",
]
