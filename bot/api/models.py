"""The REST API's request and response shapes: plain pydantic models, never the SQLModel tables.

Requests forbid unknown fields, so a misspelt field is a 422 naming it rather than a silent
no-op. Values the scheduler rules on (class, placement, genesis) are checked again there; the
models state the shape and the OpenAPI document shows it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from scheduler import bounds

ClassChoice = Literal["priority", "spot", "default"]
GenesisName = Literal["command", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown"]
TriggerKind = Literal["slack", "github_issue", "github_label", "schedule", "ao_event"]
Place = Literal["top_of_spot"]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- bounds
# The shared bounds (`scheduler.bounds`) as field types: a value past them is a 422 naming the
# field, before any row is read or written.


def _storable(value: str) -> str:
    problem = bounds.text_problem(value)
    if problem is not None:
        raise PydanticCustomError("unstorable_text", problem)
    return value


def _not_blank(value: str) -> str:
    if bounds.is_blank(value):
        raise PydanticCustomError("blank_text", "must not be blank: it holds only whitespace")
    return value


def _storable_tree(value: dict[str, Any]) -> dict[str, Any]:
    problem = bounds.tree_problem(value)
    if problem is not None:
        raise PydanticCustomError("unstorable_json", problem)
    return value


Text = Annotated[str, AfterValidator(_storable)]
Prompt = Annotated[str, Field(min_length=1), AfterValidator(_storable), AfterValidator(_not_blank)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_tree)]
RowId = Annotated[int, Field(ge=1, le=bounds.MAX_ID)]
Precedence = Annotated[int, Field(ge=-bounds.MAX_PRECEDENCE, le=bounds.MAX_PRECEDENCE)]
SessionId = Annotated[int, Path(ge=1, le=bounds.MAX_ID, description="A session id")]
TriggerId = Annotated[int, Path(ge=1, le=bounds.MAX_ID, description="A trigger id")]


# --------------------------------------------------------------------------- errors


class ErrorBody(BaseModel):
    error: str = Field(description="unauthorized | forbidden | not_found | invalid_input | conflict | too_large")
    message: str = Field(description="What is wrong and, where there is one, the fix")
    field: str | None = Field(None, description="The request field at fault, when one is")
    errors: list[dict[str, Any]] | None = Field(None, description="Every field at fault, for a 422")


# --------------------------------------------------------------------------- sessions


class SessionCreate(Request):
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
    capacity: int | None = Field(None, ge=1, le=bounds.MAX_CAPACITY, description="Per-session capacity budget (1: run alone)")
    concurrency_group: Text | None = Field(None, max_length=200)
    repository: Text | None = Field(None, max_length=201, description="owner/name: its turns work in a worktree of it")


class SessionPatch(Request):
    scheduling_class: ClassChoice | None = Field(None, description="priority, spot, or default (derive again)")
    precedence: Precedence | None = None
    place: Place | None = None


class MessageCreate(Request):
    text: Prompt = Field(description="The follow-up turn's prompt")


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
    status: str
    genesis: str
    scheduling_class: Literal["priority", "spot"] = Field(description="Resolved: own > trigger > genesis")
    class_source: Literal["session", "trigger", "genesis"]
    precedence: int
    trigger_id: int | None
    parent_session_id: int | None
    forked_from: int | None
    runtime: str
    weight: float
    capacity: int | None
    concurrency_group: str | None
    requester: str | None
    created_at: datetime
    updated_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None


class SessionDetail(SessionOut):
    prompt: str
    waiting: WaitingOut | None = Field(description="Why it is waiting: the headline and the others on the record")
    hold: HoldRecord | None
    pause: PauseRecord | None
    park: ParkRecord | None
    wake_at: datetime | None
    queued_messages: int


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


class SessionChanged(BaseModel):
    session: SessionDetail
    changed: dict[str, list[Any]] = Field(description="field -> [before, after], only what moved")
    start_now: StartNowOut | None = Field(None, description="A waiting session promoted to priority is started now")


class Archived(BaseModel):
    session: SessionDetail
    previous_status: str


class MessagePosted(BaseModel):
    session: SessionDetail
    human_message: bool = Field(description="Recorded as a rostered human's message: it jumps the spot queue")
    message_id: int | None = Field(None, description="The human message's id, when recorded as one")
    submission: SubmissionOut | None = Field(
        None, description="The follow-up's submission; null for a human message (the session's state says where it went)"
    )


# --------------------------------------------------------------------------- triggers


def _integer_precedence(value: Any) -> Any:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise PydanticCustomError(
        "trigger_precedence",
        "a trigger takes a whole number only; top_of_spot is a placement, resolved once, and would be a stale "
        "number by the trigger's first spawn (got {value!r})",
        {"value": value},
    )


TriggerPrecedence = Annotated[Precedence | None, BeforeValidator(_integer_precedence)]


class TriggerCreate(Request):
    name: Text = Field(min_length=1, max_length=100)
    kind: TriggerKind
    prompt_template: Text = Field(min_length=1, description="Jinja2, rendered in a sandbox at every fire")
    config: JsonObject = Field(default_factory=dict, description="Kind-specific; see the trigger kinds")
    scheduling_class: ClassChoice | None = None
    precedence: TriggerPrecedence = Field(None, description="A whole number only: a trigger never takes top_of_spot")
    concurrency_group: Text | None = Field(None, max_length=200)
    enabled: bool = True


class TriggerPatch(Request):
    name: Text | None = Field(None, min_length=1, max_length=100)
    kind: TriggerKind | None = Field(None, description="Cannot change; accepted only when it matches")
    prompt_template: Text | None = Field(None, min_length=1)
    config: JsonObject | None = None
    scheduling_class: ClassChoice | None = None
    precedence: TriggerPrecedence = None
    concurrency_group: Text | None = Field(None, max_length=200)
    enabled: bool | None = None


class TriggerOut(BaseModel):
    id: int
    name: str
    kind: str
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


# --------------------------------------------------------------------------- policy and holds


class PolicyPatch(Request):
    gating_enabled: bool | None = None
    reserve_5h_pct: float | None = Field(None, ge=0, le=100)
    reserve_7d_pct: float | None = Field(None, ge=0, le=100)
    max_sessions: int | None = Field(None, ge=1, le=bounds.MAX_SESSIONS)
    preemption_enabled: bool | None = None
    genesis_class_overrides: dict[str, Literal["priority", "spot"] | None] | None = Field(
        None, description="command / api / unknown -> priority | spot; null removes an override"
    )


class PolicyRow(BaseModel):
    gating_enabled: bool
    reserve_5h_pct: float
    reserve_7d_pct: float
    max_sessions: int
    preemption_enabled: bool
    genesis_class_overrides: dict[str, str]


class PolicyOut(BaseModel):
    policy: PolicyRow
    gate: dict[str, Any] = Field(
        description="The gate card: the decision for a spot session now (allowed, reason, ceiling, why, until), "
        "the windows (capacity, spent, reserved, spot budget, sustainable rate, fleet burn), the fleet and the queue"
    )
    audit: list[str] = Field(description="Recent policy audit lines, newest first")


class PolicyChanged(BaseModel):
    policy: PolicyRow
    audit: str | None = Field(description="The audit line written, or null when nothing moved")


class HoldsOut(BaseModel):
    source: Literal["holds_view", "records"] = Field(description="holds_view: the read model every surface shows")
    queue_holds: list[dict[str, Any]] = Field(description="The whole queue or a group stopped, with label, sentence, resumes_at")
    operator_holds: list[dict[str, Any]] = Field(description="Holds a person placed on a selector, with armer, reason, expiry")
    sessions: list[dict[str, Any]] = Field(description="Each held, paused, parked or sleeping session, headline record first")
    sessions_not_shown: int
