"""The durable truth: SQLModel tables. A timer is only an alarm clock; the row is the record.

Table models skip validation, so every surface validates input with its own plain model or
parser first. Datetimes are stored as UTC and always read back timezone-aware.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Integer, Table, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from scheduler.store import buckets, forecast_table, versions  # noqa: F401  (the versions' triggers and a table come with the schema)
from scheduler.store.columns import UTCDateTime, index_the_queue, json_column, utc_column


class Status(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    NEEDS_INPUT = "needs_input"
    DONE = "done"
    FAILED = "failed"
    BLOCKED = "blocked"
    ARCHIVED = "archived"


ACTIVE_STATUSES = (Status.WAITING, Status.RUNNING, Status.NEEDS_INPUT)


class Trigger(SQLModel, table=True):
    __tablename__ = "triggers"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    kind: str  # slack | github_issue | github_label | schedule | ao_event
    scheduling_class: str | None = None
    precedence: int | None = None
    prompt_template: str = "{{ text }}"
    config: dict[str, Any] = json_column({})
    concurrency_group: str | None = None
    enabled: bool = True
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


_MARKED = text("preempt_mark_at IS NOT NULL")


class Session(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (
        Index("ix_sessions_queue", "status", "precedence"),
        Index("ix_sessions_hold_retry", "hold_retry_at"),
        # Marks are few and three readers look for them every few minutes: a partial index.
        Index("ix_sessions_preempt_mark", "preempt_mark_at", sqlite_where=_MARKED, postgresql_where=_MARKED),
    )

    id: int | None = Field(default=None, primary_key=True)
    title: str = ""
    genesis: str = "unknown"
    scheduling_class: str | None = None  # NULL: derived on every read
    class_from_trigger: bool = False  # the class was stamped by the trigger, not chosen here
    trigger_id: int | None = Field(default=None, foreign_key="triggers.id", index=True)
    parent_id: int | None = Field(default=None, foreign_key="sessions.id")
    forked_from_id: int | None = Field(default=None, foreign_key="sessions.id")
    bookkeeping: bool = False  # Pacer's own digest/summary work: refused, never queued
    precedence: int = Field(default=0)
    status: str = Field(default=Status.WAITING, index=True)
    runtime: str = "echo"
    weight: float = 1.0
    capacity: int | None = None
    capacity_multiplier: float | None = None  # the fleet's slot budget times this, instead of `capacity`
    cost_cap_usd: float | None = None  # its turns' cost may reach this and no further (scheduler.holds.cost_caps)
    concurrency_group: str | None = Field(default=None, index=True)
    requester: str | None = None
    agent_session_id: str | None = None
    workdir: str | None = None
    repository: str | None = None  # "owner/name": its turns run in a worktree of it (integrations.workspaces)
    source: dict[str, Any] = json_column({})  # where it came from: issue, channel, thread, labels
    thread_key: str | None = Field(default=None, index=True)  # "<channel>:<thread ts>" of its Slack thread
    prompt: str = ""  # the first turn's prompt, durable so a lost first start can be rebuilt
    attachments: list[dict[str, Any]] = json_column([])

    # The hold record (the gate refused a turn).
    hold_reason: str | None = None
    hold_count: int = 0
    hold_at: datetime | None = utc_column()
    hold_retry_at: datetime | None = utc_column()
    hold_sentence: str | None = None
    hold_prompt: str | None = None
    hold_attachments: list[dict[str, Any]] = json_column([])
    hold_turn_kind: str | None = None

    # The pause record (budget ceiling, preemption, a deliberate park).
    pause_reason: str | None = None
    pause_at: datetime | None = utc_column()
    pause_detail: str | None = None
    pause_count: int = 0
    paused_by: str | None = None
    pause_resume_prompt: str | None = None

    # A queue-hold park (auth outage, credits …) and a wall-clock sleep.
    park_reason: str | None = None
    park_at: datetime | None = utc_column()
    wake_at: datetime | None = utc_column()
    wake_prompt: str | None = None
    pending_sleep: bool = False

    # Preemption: the mark and the durable ledger.
    preempt_mark_at: datetime | None = utc_column()
    preempted_by_id: int | None = None
    preemption_count: int = 0
    last_preempted_at: datetime | None = utc_column()
    demotion_count: int = 0

    consecutive_failures: int = 0
    # Turns started to fix a failed check on its pull request (bot.github.ci): PACER_FIX_BUDGET bounds them.
    fix_attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))
    updated_at: datetime | None = utc_column()
    started_at: datetime | None = utc_column()
    finished_at: datetime | None = utc_column()


SESSIONS: Table = index_the_queue(Session.__table__)  # type: ignore[attr-defined]  # the Core table, for Core reads


class Turn(SQLModel, table=True):
    __tablename__ = "turns"
    # Quota: covering indexes, so the ledger's window sums and the burn rates' latest turns per
    # runtime read index entries only, however long the history (100k turns: ~10 ms, not ~250).
    __table_args__ = (
        Index("ix_turns_finished_cost", "finished_at", "cost_usd"),
        Index("ix_turns_burn", "runtime", "finished_at", "cost_usd", "duration_ms", "model"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    kind: str = "first"  # first | follow_up | wake | poll | restart | nudge | clone_only | monitoring
    prompt: str = ""
    attachments: list[dict[str, Any]] = json_column([])
    status: str = Field(default="queued", index=True)  # queued | running | done | failed | halted
    outcome: str | None = None
    runtime: str = "echo"
    model: str | None = None  # the model it ran, when its runner knows (the burn table's rows)
    cost_usd: float = 0.0
    output: str = ""
    error: str | None = None
    duration_ms: int | None = None
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    started_at: datetime | None = utc_column(index=True)
    finished_at: datetime | None = utc_column(index=True)
    # The process executing a running turn and until when it vouches for it: its heartbeat
    # renews the lease, and recovery takes only a turn whose lease has run out (`scheduler.engine.leases`).
    owner: str | None = None
    lease_expires_at: datetime | None = utc_column()
    # The procrastinate job that runs the turn on a worker machine (`integrations.turn_queue`);
    # None when the deciding process runs it on its own workers.
    job_id: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    # What its agent is doing while it runs, as the runner last read it from the agent's stream
    # (`integrations.runners.progress.as_plain`: tool, detail, todos, cost_usd, tools_used) and
    # when; and the Slack message that shows it in the session's thread, edited in place.
    progress: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    progress_at: datetime | None = utc_column()
    progress_message: str | None = None
    listening: bool = False  # its agent takes people's messages mid-turn now (`integrations.turn_inbox`)


class PreemptionEvent(SQLModel, table=True):
    """One charged preemption: who yielded, to whom, the turn it was running, and whether that
    turn was halted. `Session.preemption_count` says how many in a life; only these rows say
    when and between whom (`scheduler.rules.cycling`). A mark released un-charged deletes its row."""

    __tablename__ = "preemption_events"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    by_id: int | None = None
    turn_id: int | None = None
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))
    halted: bool = False


class EnqueuedMessage(SQLModel, table=True):
    """The durable per-session message queue: a second refused turn waits here, in order."""

    __tablename__ = "enqueued_messages"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    prompt: str
    attachments: list[dict[str, Any]] = json_column([])
    kind: str = "follow_up"
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    delivered_at: datetime | None = utc_column()


class HumanMessage(SQLModel, table=True):
    __tablename__ = "human_messages"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    actor: str
    surface: str  # slack_thread | console | api
    text: str
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class Policy(SQLModel, table=True):
    """The operator-set scheduling policy: a single row."""

    __tablename__ = "policy"

    id: int | None = Field(default=None, primary_key=True)
    gating_enabled: bool = True
    reserve_5h_pct: float = 20.0
    reserve_7d_pct: float = 20.0
    max_sessions: int = 10
    # A temporary max sessions (seed 000): in force until its expiry, then the configured one again.
    max_sessions_override: int | None = None
    max_sessions_override_until: datetime | None = utc_column()
    preemption_enabled: bool = True
    demand_pacing_enabled: bool = True  # the pace holds only when the window's demand needs it (`rules.demand`)
    overage_spot_enabled: bool = False  # spot work may run on the provider's overage (counted as spend); off: refused
    window_reserves: dict[str, float] = json_column({})  # a per-model weekly bucket ("7d_opus") -> its reserve %
    genesis_class_overrides: dict[str, str] = json_column({})
    cost_budgets: dict[str, float] = json_column({})  # runtime -> US dollars (seed 002, "Cost budget")
    spend_reset_at: dict[str, str] = json_column({})  # runtime -> ISO instant its spend counts from
    # The backlog top-up thresholds (seed 001, "Its sibling"): see `scheduler.rules.top_up`.
    top_up_ceiling: int = 3
    top_up_stretch_minutes: int = 0
    top_up_cooldown_minutes: int = 30


class TopUpRecord(SQLModel, table=True):
    """The top-up sweep's own state, one row: written by the sweep, never by an operator, so
    outside the policy audit (seed 001, "Every change to both ceilings is recorded")."""

    __tablename__ = "top_up_state"

    id: int | None = Field(default=None, primary_key=True)
    under_since: datetime | None = utc_column()
    fired_at: datetime | None = utc_column()


class PolicyAudit(SQLModel, table=True):
    __tablename__ = "policy_audit"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    surface: str
    actor: str | None = None
    changes: dict[str, Any] = json_column({})
    line: str


class OperatorHold(SQLModel, table=True):
    __tablename__ = "operator_holds"

    id: int | None = Field(default=None, primary_key=True)
    selector_kind: str  # session | genesis | trigger | repository | label | class | all
    selector_value: str = ""
    armer: str
    reason: str = ""
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    expires_at: datetime | None = utc_column()
    released_at: datetime | None = utc_column()
    released_by: str | None = None
    # [held id, waiting id] pairs people were told of, once each; a row written without it (an older process) has none
    deadlocks_told: list[list[int]] = Field(default_factory=list,
                                            sa_column=Column(JSON, nullable=False, server_default=text("'[]'")))


class QueueHold(SQLModel, table=True):
    __tablename__ = "queue_holds"

    id: int | None = Field(default=None, primary_key=True)
    group: str | None = Field(default=None, index=True)  # NULL: the whole queue
    reason: str
    sentence: str = ""
    detail: dict[str, Any] = json_column({})
    since: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    resumes_at: datetime | None = utc_column()
    attempt: int = 1
    announced_at: datetime | None = utc_column()
    released_at: datetime | None = utc_column()


class Prerequisite(SQLModel, table=True):
    __tablename__ = "prerequisites"
    __table_args__ = (UniqueConstraint("session_id", "target_kind", "target_ref"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    target_kind: str  # issue | session
    target_ref: str  # "owner/repo#12" or a session id


class WebhookDelivery(SQLModel, table=True):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (UniqueConstraint("hook_id", "delivery_id"),)

    id: int | None = Field(default=None, primary_key=True)
    hook_id: str
    delivery_id: str
    event: str = ""
    received_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class IdempotencyKey(SQLModel, table=True):
    """A POST /api/v1/sessions sent with an Idempotency-Key (`bot.api.idempotency`): written in
    the transaction that makes its session, so a retry finds the session it made, and its answer."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("caller", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    caller: str  # who sent it: the API's name for its caller
    key: str
    fingerprint: str  # SHA-256 of the request body, canonical JSON
    session_id: int = Field(foreign_key="sessions.id")
    answer: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # None: not answered yet
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))


class SlackEvent(SQLModel, table=True):
    __tablename__ = "slack_events"

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(unique=True)
    received_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class SlackHomeViewer(SQLModel, table=True):
    """Someone who opened Pacer's App Home, and when last: whose Home is republished when the
    queue moves. In the database, so whichever process moves the queue knows who is looking."""

    __tablename__ = "slack_home_viewers"

    user_id: str = Field(primary_key=True)
    opened_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))


class StatusComment(SQLModel, table=True):
    """The one sticky GitHub comment per issue, found by its marker and edited in place."""

    __tablename__ = "status_comments"
    __table_args__ = (UniqueConstraint("repository", "number"),)

    id: int | None = Field(default=None, primary_key=True)
    repository: str
    number: int
    comment_id: int | None = None
    body: str = ""
    updated_at: datetime | None = utc_column()


class BudgetNotice(SQLModel, table=True):
    """The early notice a running spot session was given that a window's spot budget runs out
    (`scheduler.pauses.budget_notice`): one row per session and window, taken over by the next notice
    only once the window it named has rolled over, so each window instance tells a session once
    whichever process runs the sweep."""

    __tablename__ = "budget_notices"

    session_id: int = Field(primary_key=True)
    window: str = Field(primary_key=True)
    resets_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    runs_out_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    sent_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class ProviderWindowReading(SQLModel, table=True):
    """The latest reading of one quota window of one account, as the provider printed it in an
    agent's stream (`integrations.quota.agents`): one row per (account, window kind), written by
    whichever process ran the turn, read by whichever decides."""

    __tablename__ = "provider_readings"

    account: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)  # the provider's own name: five_hour, seven_day, seven_day_opus, ...
    provider: str
    status: str | None = None  # allowed | allowed_warning | rejected
    utilization: float | None = None
    resets_at: datetime | None = utc_column()
    is_using_overage: bool | None = None
    overage_status: str | None = None
    observed_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class StoreVersion(SQLModel, table=True):
    """How often each kept store's table has been written, counted by database triggers
    (`scheduler.store.versions`): what lets a read be kept across transactions and processes."""

    __tablename__ = "store_versions"

    name: str = Field(primary_key=True)
    version: int = 0
