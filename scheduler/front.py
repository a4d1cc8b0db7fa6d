"""The front: the names `bot/` uses from the scheduler, in one place. A chat handler, a route or
the simulator imports from here and never from a layer's module, so a layer can move a function
between its modules without touching `bot/`, and `__all__` below, grouped by what a surface does
with each name, is the list of what the face may ask of the engine.

Beside the front, `bot/` may import the root's vocabulary directly: `scheduler.errors` (the error
tree), `scheduler.bounds` (input limits and their checks), `scheduler.ports` (the Protocols and
values an adapter implements), `scheduler.clock` and `scheduler.log_context`. They import nothing
of the scheduler but one another, so a light process (`pacer --help`, the settings check, the log
set-up) reads them without loading the store and the engine; the front does not repeat them.

The composition root, `bot/runtime/`, builds the process from `scheduler.wiring`, the Context and
the lifecycle directly, and the simulator's engine installs `scheduler.wiring` into its virtual
process the same way: that plumbing is not a verb a surface calls. `tests/test_architecture.py`
holds `bot/` to these doors.
"""

from __future__ import annotations

from scheduler.alarms import CEILING_SWEEP, HOLD_SWEEP
from scheduler.context import Context, Limits, Ports, Runtime
from scheduler.engine.attempt import Block, Submission
from scheduler.engine.effects import Effects
from scheduler.engine.fleet import read_quota
from scheduler.engine.lifecycle import STOPPED_KEY, Stopped, archive, stop
from scheduler.engine.pause import AT_UTILIZATION_LIMIT
from scheduler.engine.pause import COOLDOWN as PREEMPTION_COOLDOWN
from scheduler.engine.records import hold_job_id
from scheduler.engine.restart import restart_from_scratch
from scheduler.engine.start_now import StartNowResult, start_now
from scheduler.engine.turns import submit_turn, submit_turns
from scheduler.engine.verdict import new_spot_asking, spot_probe, verdict_now
from scheduler.holds.budgets import reset_spend, spends
from scheduler.holds.capacity import ClaimChange, change_claim
from scheduler.holds.cost_caps import REASON as COST_CAP_REASON
from scheduler.holds.cost_caps import set_cap
from scheduler.holds.groups import repository_group
from scheduler.holds.operator import (
    MAX_REASON,
    MAX_TTL,
    SELECTOR_KINDS,
    NewOperatorHold,
    add_hold,
    announce_holds,
    end_hold,
    place_hold,
    release_hold,
)
from scheduler.holds.prerequisites import set_issue_state
from scheduler.holds.queue import REASONS as QUEUE_HOLD_REASONS
from scheduler.holds.queue import resume_queue
from scheduler.holds.view import HoldsView, all_holds
from scheduler.jobs import targets as job_targets
from scheduler.pauses.budget_notice import Standing as StandingNotice
from scheduler.pauses.budget_notice import standing_notices
from scheduler.pauses.parking import MAX_RESUME_PROMPT_CHARS, pause_into_spot_queue
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.quota_reuse import ReusedQuotaSource
from scheduler.rules import queue_ladder
from scheduler.rules.cycling import WINDOW as CYCLING_WINDOW
from scheduler.rules.cycling import Event as CyclingEvent
from scheduler.rules.cycling import detect as detect_cycling
from scheduler.rules.explain import explain
from scheduler.rules.forecast import Forecast
from scheduler.rules.gate import Reason as GateReason
from scheduler.rules.gate import WindowFigures, pace_unneeded, projection_minutes
from scheduler.rules.genesis import (
    OVERRIDABLE,
    Genesis,
    SchedulingClass,
    genesis_default,
    parse_class,
    validate_overrides,
)
from scheduler.rules.pool import pool_utilization
from scheduler.rules.precedence import DEFAULT_PRECEDENCE, TOP_OF_SPOT, resolve_placement
from scheduler.rules.snapshot import PolicyView, WindowState, window_label
from scheduler.rules.top_up import TOP_UP_ATTRIBUTES, TOP_UP_KEYS, TOP_UP_RANGES
from scheduler.rules.waiting import SPOT_GATE_REASONS, Mechanism, waiting_reason
from scheduler.rules.windows import share_before, window_bounds
from scheduler.steering.burn_view import PROJECTION_MINUTES, BurnRate, burn_rows
from scheduler.steering.firing import Fired, TriggerEvent, fire, render_trigger_prompt, schedule_fire
from scheduler.steering.forecasting import forecast_from, forecast_now
from scheduler.steering.forecasting import refresh as refresh_forecasts
from scheduler.steering.gate_card import GateCard, build_card, render_card
from scheduler.steering.promotion import record_human_message
from scheduler.steering.session_events import FILTER_KEYS, FLEET_EVENTS, session_event
from scheduler.steering.session_events import STATES as EVENT_STATES
from scheduler.steering.session_facts import FinishedRow, SessionFacts, facts_of, finished_since
from scheduler.steering.summary import Summary, summarize
from scheduler.steering.timeline import Timeline, last_day
from scheduler.steering.trigger_release import arm_release
from scheduler.store.db import core, make_engine, migrate, ping, session_scope, steer_in_turn
from scheduler.store.forecast_rows import forecast_of, forecasts_of
from scheduler.store.forecast_table import SessionForecast
from scheduler.store.models import (
    ACTIVE_STATUSES,
    SESSIONS,
    EnqueuedMessage,
    HumanMessage,
    IdempotencyKey,
    OperatorHold,
    Policy,
    PolicyAudit,
    QueueHold,
    Session,
    SlackEvent,
    SlackHomeViewer,
    Status,
    Trigger,
    Turn,
    WebhookDelivery,
)
from scheduler.store.policy import (
    MAX_OVERRIDE_FOR,
    PER_MODEL_BUCKET,
    audit_log,
    budget_amount,
    ensure_policy,
    load_policy,
    reserve_percentage,
    reserve_window,
    set_policy,
)
from scheduler.store.preemption_ledger import cycling_now, events_since
from scheduler.store.prerequisite_rows import parse_prerequisites, record_prerequisites
from scheduler.store.ranking import (
    QueueFilter,
    Reclassification,
    change_class,
    change_trigger_class,
    queue_order,
    ranked_queue,
    reorder_between,
    set_precedence,
)
from scheduler.store.session_view import session_view
from scheduler.store.sessions import (
    NewSession,
    class_expr,
    class_from,
    class_of,
    create_session,
    get_session,
    get_trigger,
    insert_session,
    is_spot,
)
from scheduler.store.turn_reads import running_progress, spends_by, spent_by
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers

__all__ = [
    "Summary",
    "summarize",
    "DEFAULT_PRECEDENCE",
    "SPOT_GATE_REASONS",
    # The store: a transaction, its engine and migrations, the steering lock, a raw statement.
    "session_scope",
    "make_engine",
    "migrate",
    "ping",
    "steer_in_turn",
    "core",
    # The tables a surface reads and writes, and the statuses it filters by.
    "Session",
    "Turn",
    "Status",
    "ACTIVE_STATUSES",
    "SESSIONS",
    "Trigger",
    "HumanMessage",
    "EnqueuedMessage",
    "OperatorHold",
    "QueueHold",
    "Policy",
    "PolicyAudit",
    "IdempotencyKey",
    "SlackEvent",
    "SlackHomeViewer",
    "WebhookDelivery",
    # Sessions: create, find, classify and order them.
    "NewSession",
    "create_session",
    "insert_session",
    "get_session",
    "get_trigger",
    "Genesis",
    "genesis_default",
    "SchedulingClass",
    "parse_class",
    "validate_overrides",
    "OVERRIDABLE",
    "class_of",
    "class_from",
    "class_expr",
    "is_spot",
    "parse_prerequisites",
    "record_prerequisites",
    # Submitting work: turns, human messages, trigger firings and session events.
    "submit_turn",
    "submit_turns",
    "Submission",
    "Block",
    "Effects",
    "record_human_message",
    "fire",
    "schedule_fire",
    "Fired",
    "TriggerEvent",
    "render_trigger_prompt",
    "session_event",
    "EVENT_STATES",
    "FILTER_KEYS",
    "FLEET_EVENTS",
    # Steering a session: start it now, restart, archive or stop, move it in the queue or to another class.
    "start_now",
    "StartNowResult",
    "restart_from_scratch",
    "archive",
    "stop",
    "Stopped",
    "STOPPED_KEY",
    "change_class",
    "change_trigger_class",
    "Reclassification",
    "arm_release",
    "set_precedence",
    "reorder_between",
    "TOP_OF_SPOT",
    "resolve_placement",
    "ClaimChange",
    "change_claim",
    # Holds: the operator's, the queue's, prerequisites, groups, budgets and cost caps, and their view.
    "NewOperatorHold",
    "place_hold",
    "add_hold",
    "release_hold",
    "end_hold",
    "announce_holds",
    "MAX_OVERRIDE_FOR",
    "MAX_REASON",
    "MAX_TTL",
    "SELECTOR_KINDS",
    "QUEUE_HOLD_REASONS",
    "resume_queue",
    "set_issue_state",
    "repository_group",
    "spends",
    "reset_spend",
    "set_cap",
    "spent_by",
    "running_progress",
    "spends_by",
    "COST_CAP_REASON",
    "HoldsView",
    "all_holds",
    "hold_job_id",
    # Pauses a person asks for: park a session in the spot queue, sleep until later.
    "pause_into_spot_queue",
    "MAX_RESUME_PROMPT_CHARS",
    "wake_me_up_later",
    # Reading: why a session waits, what the gate would say, the gate card, the timeline, the fleet.
    "session_view",
    "burn_rows",
    "BurnRate",
    "PROJECTION_MINUTES",
    "QueueFilter",
    "queue_ladder",
    "queue_order",
    "ranked_queue",
    "Mechanism",
    "waiting_reason",
    "explain",
    # The start-time forecast: computed off every request's path, kept per session, read by the views.
    "Forecast",
    "forecast_now",
    "forecast_from",
    "refresh_forecasts",
    "SessionForecast",
    "forecast_of",
    "forecasts_of",
    "verdict_now",
    "spot_probe",
    "new_spot_asking",
    "read_quota",
    "GateCard",
    "build_card",
    "render_card",
    "Timeline",
    "last_day",
    "SessionFacts",
    "FinishedRow",
    "facts_of",
    "finished_since",
    "StandingNotice",
    "standing_notices",
    "PolicyView",
    "WindowState",
    "WindowFigures",
    "GateReason",
    "pace_unneeded",
    "projection_minutes",
    "pool_utilization",
    "cycling_now",
    "events_since",
    # Policy: read it, change it and its audit, the budget, the top-up settings.
    "load_policy",
    "set_policy",
    "ensure_policy",
    "audit_log",
    "PER_MODEL_BUCKET",
    "budget_amount",
    "reserve_percentage",
    "reserve_window",
    "TOP_UP_ATTRIBUTES",
    "TOP_UP_KEYS",
    "TOP_UP_RANGES",
    # The process a surface is handed.
    "Context",
    "Ports",
    "Limits",
    "Runtime",
    # The simulator: the virtual clock, deferrer and workers, the job targets and alarms it runs, the
    # quota it replays, and the window and cycling arithmetic it scores by.
    "VirtualClock",
    "VirtualDeferrer",
    "VirtualWorkers",
    "job_targets",
    "CEILING_SWEEP",
    "HOLD_SWEEP",
    "ReusedQuotaSource",
    "window_bounds",
    "share_before",
    "CYCLING_WINDOW",
    "CyclingEvent",
    "detect_cycling",
    "PREEMPTION_COOLDOWN",
    "AT_UTILIZATION_LIMIT",
    "window_label",
]
