"""The REST API's request and response shapes for sessions and triggers: plain pydantic models,
never the SQLModel tables (the policy's and the holds' are in `policy_models.py`).

Requests forbid unknown fields, so a misspelt field is a 422 naming it rather than a silent
no-op. Closed sets are enums and every bound is in the schema, so the OpenAPI document calls a
request valid only when the server takes it; what it cannot state (a row a field names, a
configured runtime, a trigger's config and template, which the server checks) is a 422 naming
the field. Values the scheduler rules on (class, placement, genesis) are checked again there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from bot.api.fields import (
    Capacity,
    Change,
    ClassChoice,
    CostCap,
    GenesisName,
    JsonObject,
    Multiplier,
    Place,
    Precedence,
    Prompt,
    Repository,
    Request,
    RowId,
    StatusName,
    Template,
    Text,
    TriggerKind,
    TriggerName,
    exclusive,
    never_null,
    whole,
)
from scheduler import bounds
from templates import error_text

# --------------------------------------------------------------------------- sessions


class SessionCreate(Request):
    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                exclusive("precedence", "place"),
                exclusive("parent_session_id", "forked_from"),
                exclusive("capacity", "capacity_multiplier"),
            ]
        }
    )

    prompt: Prompt = Field(description="The first turn's prompt")
    title: Text | None = Field(None, max_length=200, description="Defaults to the prompt's first line")
    scheduling_class: ClassChoice | None = Field(None, description="Omit or 'default' to derive it from genesis")
    precedence: Precedence | None = Field(None, description="Rank in the spot queue; exclusive with place")
    place: Place | None = Field(None, description="'top_of_spot': resolved server-side; exclusive with precedence")
    parent_session_id: RowId | None = Field(None, description="Spawned by this session: inherits its genesis")
    forked_from: RowId | None = Field(None, description="Forked from this session: inherits its genesis")
    genesis: GenesisName | None = Field(None, description="Declared genesis; default api (or the parent's)")
    runtime: Text | None = Field(None, max_length=100, description="A configured runtime; default the server's")
    weight: float = Field(1.0, ge=0, le=bounds.MAX_WEIGHT, allow_inf_nan=False, description="Capacity claim; 0 allowed")
    capacity: Capacity | None = Field(None, description="Per-session capacity budget (1: run alone)")
    capacity_multiplier: Multiplier | None = Field(
        None, description="Its budget as this multiple of the fleet's slots (1.5: 7.5 of 5)"
    )
    cost_cap_usd: CostCap | None = Field(None, description="Its turns may cost this many US dollars together, no more")
    concurrency_group: Text | None = Field(None, max_length=200)
    repository: Repository | None = Field(
        None,
        max_length=bounds.MAX_REPOSITORY_CHARS,
        description="owner/name: its turns work in a worktree of it; kept in lower case",
    )


class SessionPatch(Change):
    model_config = ConfigDict(
        json_schema_extra={"allOf": [exclusive("precedence", "place"), exclusive("capacity", "capacity_multiplier")]}
    )

    scheduling_class: ClassChoice | None = Field(None, description="priority, spot, or default (derive again)")
    precedence: Precedence | None = None
    place: Place | None = None
    weight: float | None = Field(
        None, ge=0, le=bounds.MAX_WEIGHT, allow_inf_nan=False, description="Capacity claim; 0 allowed"
    )
    capacity: Capacity | None = Field(None, description="Its own capacity budget; null: the fleet's again")
    capacity_multiplier: Multiplier | None = Field(
        None, description="Its budget as a multiple of the fleet's slots; null: the fleet's again"
    )
    cost_cap_usd: CostCap | None = Field(None, description="Its cost cap in US dollars; null: no cap")


class MessageCreate(Request):
    text: Prompt = Field(description="The follow-up turn's prompt", examples=["and update the docs too"])


class HoldRecord(BaseModel):
    reason: str
    count: int
    at: datetime | None
    retry_at: datetime | None
    sentence: str | None


class PauseRecord(BaseModel):
    reason: str
    at: datetime | None
    detail: str | None
    paused_by: str | None


class ParkRecord(BaseModel):
    reason: str
    at: datetime | None


class StopRecord(BaseModel):
    by: str | None = Field(description="Who stopped it")
    why: Literal["closed", "unlabeled", "stop", "archive"] = Field(
        description="closed: its issue or pull request was closed; unlabeled: its trigger label was removed; "
        "stop: /pacer stop or POST .../stop; archive: /pacer archive or POST .../archive"
    )
    label: str | None = Field(description="unlabeled: the label removed")
    halted: bool = Field(description="A running turn was halted")


class MechanismOut(BaseModel):
    kind: str
    reason: str
    stamp: datetime | None
    sentence: str
    retry_at: datetime | None
    owner: str


class OtherMechanism(MechanismOut):
    why_not_headline: str


class WaitingOut(BaseModel):
    headline: MechanismOut | None
    others: list[OtherMechanism]


class SessionOut(BaseModel):
    id: int
    title: str
    status: StatusName
    genesis: GenesisName
    scheduling_class: Literal["priority", "spot"] = Field(description="Resolved: own > trigger > genesis")
    class_source: Literal["session", "trigger", "genesis"]
    precedence: int
    trigger_id: int | None
    parent_session_id: int | None
    forked_from: int | None
    runtime: str
    weight: float
    capacity: int | None
    capacity_multiplier: float | None
    cost_cap_usd: float | None = Field(description="Its cost cap in US dollars; null: none")
    spent_usd: float = Field(description="What its turns have cost so far, in US dollars")
    concurrency_group: str | None
    requester: str | None
    created_at: datetime
    updated_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None


class LadderStep(BaseModel):
    """One entry of a waiter's bounded queue ladder, or a gap (`gap`: that many not shown)."""

    place: int | None = Field(None, description="1-based on the ladder; None for a gap")
    session_id: int | None = None
    title: str | None = None
    parked: bool = Field(False, description="A blocker holds it now (display context: it is still queued)")
    group: str | None = Field(None, description="eligible | capacity | budget | prerequisite | hold")
    badges: list[str] = Field(default_factory=list, description="cN, pN, wN: what differs from the default claim")
    selected: bool = False
    gap: int | None = Field(None, description="Entries not shown here")


class LadderOut(BaseModel):
    position: int
    of: int
    ahead: int = Field(description="Earlier ladder entries; current admission context, not an ETA")
    parked: int = Field(description="Waiters a blocker holds now, on the whole ladder")
    steps: list[LadderStep] = Field(description="The front, two on either side of this one, and the gaps between")


class TodoOut(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"]
    active_form: str | None = Field(description="How the agent says it while doing it")


class ProgressOut(BaseModel):
    """What a running turn's agent is doing, as the runner last read it from the agent's stream."""

    turn_id: int
    tool: str | None = Field(description="The tool it called last (Bash, Edit, TodoWrite ...)")
    detail: str | None = Field(description="Where: a file relative to its workdir, a pattern, a description")
    todos: list[TodoOut] | None = Field(description="Its todo list (Claude Code's TodoWrite); null: it keeps none")
    tools_used: int = Field(description="Tool calls so far in this turn")
    started_at: datetime | None
    progress_at: datetime | None = Field(description="When the runner last read its progress")
    elapsed_s: int | None = Field(description="Seconds the turn has run")
    cost_usd: float = Field(description="The session's cost so far: its recorded turns, and this one's when stated")


class ForecastOut(BaseModel):
    """A waiting session's start-time forecast: an estimate, never a promise."""

    expected_start: datetime = Field(description="The median start of the runs forward from the queue")
    earliest: datetime = Field(description="The range's start: the 10% end, rounded outwards")
    latest: datetime | None = Field(description="The range's end (90%); None: later than the forecast looks ahead")
    computed_at: datetime = Field(description="When the queue was read for it")
    draws: int = Field(description="Runs forward it was read from")
    sentence: str = Field(description="As `why` words it")


class SessionDetail(SessionOut):
    prompt: str
    waiting: WaitingOut | None = Field(description="Why it is waiting: the headline and the others on the record")
    hold: HoldRecord | None
    pause: PauseRecord | None
    park: ParkRecord | None
    wake_at: datetime | None
    queued_messages: int
    stopped: StopRecord | None = Field(None, description="Archived: who ended it and how")
    progress: ProgressOut | None = Field(None, description="Running: what its agent is doing now (live progress)")
    ladder: LadderOut | None = Field(
        None, description="GET only, a waiting session: its bounded queue ladder (seed 000), eligible first"
    )
    forecast: ForecastOut | None = Field(
        None, description="A waiting session the gate or the queue holds: when it is expected to start (an estimate)"
    )


class SubmissionOut(BaseModel):
    outcome: Literal["started", "held", "queued", "refused"]
    reason: str | None
    why: str | None = Field(None, description="Held or refused: why")
    until: str | None = Field(None, description="Held: until when (a condition; the rollover bounds it)")
    retry_at: datetime | None = Field(None, description="Held: when it is asked again")
    turn_id: int | None


class SessionCreated(BaseModel):
    session: SessionDetail
    submission: SubmissionOut


class SessionList(BaseModel):
    order: Literal["created", "precedence"]
    count: int
    sessions: list[SessionOut]


class StartNowOut(BaseModel):
    shape: str = Field(description="held | paused | never_run | queued_message | stranded | running")
    sentence: str
    submission: SubmissionOut | None


class RestartOut(BaseModel):
    sentence: str
    kept: int = Field(description="Held or paused messages moved to the session's queue, delivered after this turn")
    submission: SubmissionOut


class SummaryOut(BaseModel):
    outcome: str = Field(description="forked: a bookkeeping session writes it | refused: admission would not run it")
    source_id: int = Field(description="The session summarized")
    session_id: int | None = Field(description="The bookkeeping session, when one was created (archived if refused)")
    sentence: str = Field(description="Why it was refused, or what its turn did")
    digest: str = Field(description="When refused: the blurb from the session's own record, spending no slot")


class SessionChanged(BaseModel):
    session: SessionDetail
    changed: dict[str, list[Any]] = Field(description="field -> [before, after], only what moved")
    start_now: StartNowOut | None = Field(None, description="A waiting session promoted to priority is started now")


class Archived(BaseModel):
    session: SessionDetail
    previous_status: str


class StoppedOut(Archived):
    halted: bool = Field(description="A running turn was halted (its agent stopped where it stood)")


class MessagePosted(BaseModel):
    session: SessionDetail
    human_message: bool = Field(description="Recorded as a rostered human's message: it jumps the spot queue")
    message_id: int | None = Field(None, description="The human message's id, when recorded as one")
    delivery: Literal["agent", "after_turn"] | None = Field(
        None,
        description="Where a human message went while a turn ran: 'agent', delivered to the running agent mid-turn "
        "(its CLI takes streamed input); 'after_turn', queued for the next turn. Null: no turn ran",
    )
    submission: SubmissionOut | None = Field(
        None,
        description="The follow-up's submission; null for a human message (the session's state says where it went)",
    )


# --------------------------------------------------------------------------- triggers


def _integer_precedence(value: Any) -> Any:
    value = whole(value)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise PydanticCustomError("trigger_precedence", error_text("api/trigger_precedence_whole", value=value))


TriggerPrecedence = Annotated[Precedence | None, BeforeValidator(_integer_precedence)]


class TriggerCreate(Request):
    name: TriggerName
    kind: TriggerKind
    prompt_template: Template = Field(description="Jinja2, rendered in a sandbox at every fire")
    config: JsonObject = Field(default_factory=dict, description="Kind-specific; see the trigger kinds")
    scheduling_class: ClassChoice | None = None
    precedence: TriggerPrecedence = Field(None, description="A whole number only: a trigger never takes top_of_spot")
    concurrency_group: Text | None = Field(None, max_length=200)
    enabled: bool = True


class TriggerPatch(Change):
    # A trigger always has a name, kind, template, config and enabled flag: null is not a value
    # of theirs (the document shows none; the trigger checks refuse it, naming the field), while
    # a null class, precedence or group clears it.
    model_config = ConfigDict(json_schema_extra=never_null("name", "kind", "prompt_template", "config", "enabled"))

    name: TriggerName | None = None
    kind: TriggerKind | None = Field(None, description="Cannot change; accepted only when it matches")
    prompt_template: Template | None = None
    config: JsonObject | None = None
    scheduling_class: ClassChoice | None = None
    precedence: TriggerPrecedence = None
    concurrency_group: Text | None = Field(None, max_length=200)
    enabled: bool | None = None


class TriggerOut(BaseModel):
    id: int
    name: str
    kind: TriggerKind
    scheduling_class: Literal["priority", "spot", "default"]
    precedence: int | None
    prompt_template: str
    config: dict[str, Any]
    concurrency_group: str | None
    enabled: bool
    created_at: datetime
    sessions: int | None = None


class TriggerList(BaseModel):
    count: int
    triggers: list[TriggerOut]


class TriggerChanged(BaseModel):
    trigger: TriggerOut
    changed: list[str]
    reclassified_waiting_sessions: int = Field(description="Waiting sessions that moved between classes")
    released: list[int] = Field(description="Promoted sessions handed to StartNow after the save committed")


class TriggerDeleted(BaseModel):
    deleted: int
    detached_sessions: int


class TriggerInvoke(Request):
    context: JsonObject = Field(default_factory=dict, description="Values the prompt template reads")
    title: Text | None = Field(None, max_length=200)


class TriggerInvoked(BaseModel):
    session: SessionDetail
    submission: SubmissionOut
