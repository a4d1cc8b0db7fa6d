"""The alarm targets' names: what an armed alarm, and a job row stored by APScheduler, names as
the target to run (`scheduler.jobs.targets()` maps each to its function).

A stored row outlives the code that armed it, so a name here is part of the database's contents:
renaming one takes a migration of the stored job rows (as `0018_retire_kick_alarm` did for the
queue pass's old name, "kick").
"""

from __future__ import annotations

TURN_DONE = "turn_done"  # a worker's result for a turn
RECHECK = "recheck"  # a held session's re-check
QUEUE_PASS = "queue_pass"  # a requested queue pass and the derived holds it reports
WAKE = "wake"  # a sleeping session's wake-up
SCHEDULE_FIRE = "schedule_fire"  # a cron trigger's fire
SESSION_EVENT = "session_event"  # ao_event triggers hear a session's state change
TRIGGER_RELEASE = "trigger_release"  # a reclassified trigger releases its promoted sessions
PROMOTE_AFTER_MESSAGE = "promote_after_message"  # a human message jumps the queue
OPERATOR_HOLD_EXPIRED = "operator_hold_expired"  # an operator hold's TTL
QUEUE_HOLD_DUE = "queue_hold_due"  # a queue hold's "Resumes at"
CEILING_CHECK = "ceiling_check"  # the budget ceiling, asked now
COST_CAP_DUE = "cost_cap_due"  # a capped session's burn estimate reaches its cap
MAX_OVERRIDE_EXPIRED = "max_override_expired"  # a temporary max_sessions override ends

# The periodic sweeps (`scheduler.wiring.PERIODIC`); each stored row names one of these.
HOLD_SWEEP = "hold_sweep"  # the re-check sweep (`scheduler.engine.recheck_sweep`)
CEILING_SWEEP = "ceiling_sweep"
OPERATOR_HOLD_SWEEP = "operator_hold_sweep"  # the holds' sweep (`scheduler.holds.sweep`)
AUTH_OUTAGE_SWEEP = "auth_outage_sweep"
TOP_UP_SWEEP = "top_up_sweep"
