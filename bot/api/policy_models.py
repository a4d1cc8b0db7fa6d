"""The REST API's request and response shapes for the policy and the holds: plain pydantic
models, under the rules `models.py` states (unknown fields refused, every bound in the schema).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from bot.api.fields import Change, MaxSessions, Overrides, TopUpCeiling, TopUpCooldown, TopUpStretch
from scheduler.front import PER_MODEL_BUCKET

# US dollars above 0; which runtimes exist only the deployment knows (`set_policy` says).
Budget = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Reserve = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
# A per-model weekly bucket, as `scheduler.store.policy.PER_MODEL_BUCKET` takes it: the document says so.
BUCKET_PATTERN = f"^{PER_MODEL_BUCKET.pattern}$"
BucketName = Annotated[str, StringConstraints(pattern=BUCKET_PATTERN)]
# Its document names the keys (pydantic writes `patternProperties`, which lets any other key through).
ReserveMap = Annotated[
    dict[BucketName, Reserve | None],
    WithJsonSchema({
        "type": "object", "propertyNames": {"pattern": BUCKET_PATTERN},
        "additionalProperties": {"anyOf": [{"type": "number", "minimum": 0, "maximum": 100}, {"type": "null"}]},
    }),
]


class PolicyPatch(Change):
    # A temporary max sessions comes with its expiry, a time and not null (its being ahead of now
    # only the server can say: a 409 when it is not).
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"max_sessions_override": {"type": "integer"}}, "required": ["max_sessions_override"]},
        "then": {
            "required": ["max_sessions_override_until"],
            "properties": {"max_sessions_override_until": {"type": "string"}},
        },
    })

    gating_enabled: bool | None = None
    reserve_5h_pct: float | None = Field(None, ge=0, le=100, allow_inf_nan=False)
    reserve_7d_pct: float | None = Field(None, ge=0, le=100, allow_inf_nan=False)
    max_sessions: MaxSessions | None = None
    preemption_enabled: bool | None = None
    demand_pacing_enabled: bool | None = Field(
        None, description="Hold spot work on the pacing curve only when the window's expected demand does not fit "
        "its spot budget left (on by default)"
    )
    overage_spot_enabled: bool | None = Field(
        None, description="Let spot work run on the provider's overage (extra usage), counted as spend; off (the "
        "default): spot work waits for the window's reset while an account spends overage"
    )
    genesis_class_overrides: Overrides | None = Field(
        None, description="command / api / unknown -> priority | spot; null removes an override"
    )
    cost_budgets: dict[str, Budget | None] | None = Field(
        None, description="runtime -> US dollars above 0, merged onto the budgets in force; null removes a budget, "
        "and a null map removes them all"
    )
    window_reserves: ReserveMap | None = Field(
        None, description="A per-model weekly bucket (7d_opus, 7d_sonnet) -> its own reserve, a percentage from 0 to "
        "100, merged onto those in force; null returns one to the weekly reserve, and a null map returns them all"
    )
    top_up_ceiling: TopUpCeiling | None = Field(
        None, description="Top up while fewer sessions than this run a turn; 0: off"
    )
    top_up_stretch_minutes: TopUpStretch | None = Field(
        None, description="How long under the ceiling before the first top-up"
    )
    top_up_cooldown_minutes: TopUpCooldown | None = Field(None, description="The least time between two top-ups")
    max_sessions_override: MaxSessions | None = Field(
        None,
        description="A temporary max sessions, in force until max_sessions_override_until (given with it, at most "
        "7 days away); null clears it and the configured max_sessions is in force again",
    )
    max_sessions_override_until: AwareDatetime | None = Field(
        None, strict=False, description="When the temporary max sessions expires (ISO 8601 with an offset)"
    )


class SpendReset(Change):
    runtime: str = Field(description="The runtime whose spend counts from now", min_length=1, max_length=100)


class PolicyRow(BaseModel):
    gating_enabled: bool
    reserve_5h_pct: float
    reserve_7d_pct: float
    max_sessions: int
    preemption_enabled: bool
    demand_pacing_enabled: bool = True
    overage_spot_enabled: bool = False
    window_reserves: dict[str, float] = Field(default_factory=dict, description="per-model weekly bucket -> reserve %")
    genesis_class_overrides: dict[str, str]
    cost_budgets: dict[str, float] = Field(default_factory=dict, description="runtime -> US dollars")
    max_sessions_override: int | None = Field(None, description="A temporary max sessions in force, or null")
    max_sessions_override_until: datetime | None = Field(None, description="When the temporary max sessions expires")
    spend: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each budgeted runtime's spend since its last reset: runtime, spent, budget, since, over",
    )
    top_up_ceiling: int
    top_up_stretch_minutes: int
    top_up_cooldown_minutes: int


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
    queue_holds: list[dict[str, Any]] = Field(
        description="The whole queue or a group stopped, with label, sentence, resumes_at"
    )
    operator_holds: list[dict[str, Any]] = Field(
        description="Holds a person placed on a selector, with armer, reason, expiry"
    )
    sessions: list[dict[str, Any]] = Field(
        description="Each held, paused, parked or sleeping session, headline record first"
    )
    sessions_not_shown: int
    cycling: dict[str, Any] | None = Field(
        default=None,
        description="Sessions preempted 3+ times and pairs with 2+ preemptions "
        "between them in the last 24 h, with the cost their halted turns lost",
    )


class BurnRow(BaseModel):
    runtime: str
    model: str | None = Field(description="null: the runtime's rate across its models, or a configured one")
    usd_per_minute: float
    projected_usd: float = Field(description="What this rate spends over the projection's minutes")
    turns: int = Field(description="The finished turns the rate is measured over; 0 when configured")
    source: Literal["history", "runtime", "fallback", "none"] = Field(
        description="history: measured on this runtime + model; runtime: on the runtime, no model named; "
        "fallback: configured, nothing measured yet"
    )


class BurnOut(BaseModel):
    projection_minutes: float = Field(description="How far ahead the gate projects the running fleet's burn")
    rates: list[BurnRow] = Field(description="Each runtime + model's $/min, as the gate projects with it")
