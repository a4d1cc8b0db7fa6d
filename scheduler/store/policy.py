"""The operator-set scheduling policy and its audit (seed 001: "Every change to both ceilings
is recorded"). One row; every persisted change writes one audit entry and one WARNING line."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.bounds import MAX_SESSIONS
from scheduler.context import Context, request_queue_pass
from scheduler.errors import InvalidInput
from scheduler.rules.genesis import validate_overrides
from scheduler.rules.snapshot import PolicyView
from scheduler.rules.top_up import TOP_UP_ATTRIBUTES, TOP_UP_KEYS, TOP_UP_RANGES, TopUpPolicy
from scheduler.store.caches import cached, invalidated_by, kept
from scheduler.store.db import core, session_scope
from scheduler.store.models import Policy, PolicyAudit
from templates import error_text

log = logging.getLogger("pacer.policy")

FLEET_POLICY_ATTRIBUTES = (
    "gating_enabled",
    "reserve_5h_pct",
    "reserve_7d_pct",
    "max_sessions",
    "preemption_enabled",
    "demand_pacing_enabled",
    "overage_spot_enabled",
    "window_reserves",
    "genesis_class_overrides",
    "cost_budgets",
    "spend_reset_at",
    "max_sessions_override",
    "max_sessions_override_until",
    *TOP_UP_ATTRIBUTES,
)
MAX_OVERRIDE_FOR = timedelta(days=7)  # a temporary value is temporary: at most a week
OVERRIDE_EXPIRY_JOB = "max_override_expiry"


def ensure_policy(db: DBSession, defaults: Mapping[str, Any] | None = None) -> Policy:
    row = db.get(Policy, 1)
    if row is None:
        row = Policy(id=1, **dict(defaults or {}))
        db.add(row)
        db.flush()
    return row


def view(row: Policy) -> PolicyView:
    return PolicyView(
        gating_enabled=row.gating_enabled,
        reserve_5h_pct=row.reserve_5h_pct,
        reserve_7d_pct=row.reserve_7d_pct,
        max_sessions=row.max_sessions,
        preemption_enabled=row.preemption_enabled,
        demand_pacing=row.demand_pacing_enabled,
        overage_spot=row.overage_spot_enabled,
        window_reserves=dict(row.window_reserves or {}),
        overrides=validate_overrides(row.genesis_class_overrides or {}),
        cost_budgets=dict(row.cost_budgets or {}),
        spend_reset_at=_instants(row.spend_reset_at or {}),
        max_sessions_override=row.max_sessions_override,
        max_sessions_override_until=row.max_sessions_override_until,
        top_up=TopUpPolicy(row.top_up_ceiling, row.top_up_stretch_minutes, row.top_up_cooldown_minutes),
    )


def _instants(stored: Mapping[str, str]) -> dict[str, datetime]:
    return {runtime: datetime.fromisoformat(at) for runtime, at in stored.items()}


_COLUMNS: tuple[Any, ...] = (
    Policy.gating_enabled, Policy.reserve_5h_pct, Policy.reserve_7d_pct, Policy.max_sessions,
    Policy.preemption_enabled, Policy.genesis_class_overrides, Policy.cost_budgets, Policy.spend_reset_at,
    Policy.max_sessions_override, Policy.max_sessions_override_until,
    Policy.demand_pacing_enabled, Policy.overage_spot_enabled, Policy.window_reserves,
    Policy.top_up_ceiling, Policy.top_up_stretch_minutes, Policy.top_up_cooldown_minutes,
)
_ROW = sa_select(*_COLUMNS).where(col(Policy.id) == 1)  # built once: it is read by nearly every transaction


def load_policy(db: DBSession) -> PolicyView:
    """The policy as this transaction sees it: read once, and again after the row is written;
    kept across transactions until a commit writes it (see `caches.kept`)."""
    return cached(db, "policy", lambda: kept(db, "policy", (Policy,), lambda: _read(db)))


def _read(db: DBSession) -> PolicyView:
    found = core(db, _ROW).first()
    if found is None:
        return view(ensure_policy(db))
    gating, reserve_5h, reserve_7d, max_sessions, preemption, overrides, budgets, resets, temporary, *rest = found
    until, demand, overage, reserves, *top_up = rest
    return PolicyView(
        gating_enabled=gating, reserve_5h_pct=reserve_5h, reserve_7d_pct=reserve_7d, max_sessions=max_sessions,
        preemption_enabled=preemption, overrides=validate_overrides(overrides or {}),
        cost_budgets=dict(budgets or {}), spend_reset_at=_instants(resets or {}), top_up=TopUpPolicy(*top_up),
        max_sessions_override=temporary, max_sessions_override_until=until, demand_pacing=demand,
        overage_spot=overage, window_reserves=dict(reserves or {}),
    )


invalidated_by("policy", Policy)


def _number(raw: Any, *, prefix: str = "", suffix: str = "") -> float | None:
    """`raw` as a finite number ("$12.50" with prefix "$", "30%" with suffix "%"), or None."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        value = float(str(raw).strip().removeprefix(prefix).removesuffix(suffix))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def budget_amount(runtime: str, raw: Any) -> float:
    """A cost budget in US dollars: a finite number above 0 ("50", "$12.50", 7)."""
    value = _number(raw, prefix="$")
    if value is None or value <= 0:
        raise InvalidInput(error_text("policy/budget_amount", runtime=runtime, raw=raw), field="cost_budgets")
    return value


PER_MODEL_BUCKET = re.compile(r"7d_[a-z][a-z0-9]{0,30}")  # as `window_label` names it: "weekly Opus"


def reserve_window(name: str) -> str:
    """A window that takes a reserve of its own: a per-model weekly bucket ("7d_opus"); the 5-hour
    and weekly windows have theirs (reserve_5h, reserve_7d)."""
    if not PER_MODEL_BUCKET.fullmatch(name):
        raise InvalidInput(error_text("policy/reserve_window", window=name), field="window_reserves")
    return name


def reserve_percentage(window: str, raw: Any) -> float:
    """A reserve: a percentage from 0 to 100 ("30", "30%", 12.5)."""
    value = _number(raw, suffix="%")
    if value is None or not 0 <= value <= 100:
        raise InvalidInput(error_text("policy/reserve_percentage", window=window, raw=raw), field="window_reserves")
    return value


def _known_runtimes(key: str, value: Mapping[str, Any], runtimes: Collection[str]) -> None:
    unknown = sorted(set(value) - set(runtimes))
    if runtimes and unknown:
        raise InvalidInput(
            error_text("policy/runtime_unknown", runtime=unknown[0], runtimes=sorted(runtimes)), field=key
        )


def _coerce(key: str, raw: Any) -> Any:
    def as_bool(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise InvalidInput(error_text("policy/not_on_off", key=key, value=value), field=key)

    if key in {"gating_enabled", "preemption_enabled", "demand_pacing_enabled", "overage_spot_enabled"}:
        return as_bool(raw)
    if key in {"reserve_5h_pct", "reserve_7d_pct"}:
        try:
            value = float(str(raw).rstrip("%"))
        except ValueError:
            raise InvalidInput(error_text("policy/not_percentage", key=key, raw=raw), field=key) from None
        if not 0 <= value <= 100:
            raise InvalidInput(error_text("policy/not_percentage", key=key, raw=raw), field=key)
        return value
    if key == "max_sessions_override_until":
        if raw is not None and not (isinstance(raw, datetime) and raw.tzinfo is not None):
            raise InvalidInput(error_text("policy/override_until_instant", raw=raw), field=key)
        return raw
    if key == "max_sessions_override" and raw is None:
        return None
    if key in ("max_sessions", "max_sessions_override"):
        rule = error_text("policy/max_sessions_range", raw=raw, max_sessions=MAX_SESSIONS, key=key)
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise InvalidInput(rule, field=key)
        try:
            value = int(raw)
        except ValueError:
            raise InvalidInput(rule, field=key) from None
        if not 1 <= value <= MAX_SESSIONS:
            raise InvalidInput(rule, field=key)
        return value
    if key in TOP_UP_RANGES:
        low, high = TOP_UP_RANGES[key]
        rule = error_text("policy/top_up_range", key=key, raw=raw, low=low, high=high)
        if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
            raise InvalidInput(rule, field=key)
        if not low <= int(raw) <= high:
            raise InvalidInput(rule, field=key)
        return int(raw)
    if key == "genesis_class_overrides":
        if not isinstance(raw, Mapping):
            raise InvalidInput(error_text("policy/overrides_not_mapping"), field=key)
        return {str(g): str(c) for g, c in validate_overrides(raw).items()}
    if key == "cost_budgets":
        if not isinstance(raw, Mapping):
            raise InvalidInput(error_text("policy/budgets_not_mapping"), field=key)
        return {str(runtime): budget_amount(str(runtime), amount) for runtime, amount in raw.items()}
    if key == "window_reserves":
        if not isinstance(raw, Mapping):
            raise InvalidInput(error_text("policy/reserves_not_mapping"), field=key)
        return {reserve_window(str(w)): reserve_percentage(str(w), pct) for w, pct in raw.items()}
    if key == "spend_reset_at":
        if not isinstance(raw, Mapping) or not all(isinstance(at, datetime) and at.tzinfo for at in raw.values()):
            raise InvalidInput(error_text("policy/resets_not_instants"), field=key)
        return {str(runtime): at.isoformat() for runtime, at in raw.items()}
    raise InvalidInput(error_text("policy/not_a_setting", key=key, allowed=FLEET_POLICY_ATTRIBUTES), field=key)


ALIASES = {
    "gating": "gating_enabled",
    "preemption": "preemption_enabled",
    "demand_pacing": "demand_pacing_enabled",
    "overage_spot": "overage_spot_enabled",
    "reserve_5h": "reserve_5h_pct",
    "reserve_7d": "reserve_7d_pct",
    "max": "max_sessions",
    **TOP_UP_KEYS,
}


def change_policy(
    db: DBSession,
    changes: Mapping[str, Any],
    *,
    surface: str,
    actor: str | None,
    now: datetime,
    runtimes: Collection[str] = (),
) -> PolicyAudit | None:
    """Validate every value first (a bad one changes nothing), then write and audit. Budgets
    and spend resets must name one of `runtimes` when they are given."""
    coerced = {ALIASES.get(k, k): _coerce(ALIASES.get(k, k), v) for k, v in changes.items()}
    for key in ("cost_budgets", "spend_reset_at"):
        if key in coerced:
            _known_runtimes(key, coerced[key], runtimes)
    row = ensure_policy(db)
    _check_temporary(coerced, row, now)
    moved: dict[str, list[Any]] = {}
    for key, value in coerced.items():
        old = getattr(row, key)
        if old != value:
            moved[key] = [_stored(old), _stored(value)]
            setattr(row, key, value)
    if not moved:
        return None
    who = f" by {actor}" if actor else ""
    line = f"[FleetPolicy] changed via {surface}{who}: " + ", ".join(
        f"{k} {_fmt(o)} -> {_fmt(n)}" for k, (o, n) in moved.items()
    )
    audit = PolicyAudit(at=now, surface=surface, actor=actor, changes=moved, line=line)
    db.add(row)
    db.add(audit)
    db.flush()
    # WARN on purpose: a legitimate change records itself where INFO would be dropped.
    log.warning(line)
    return audit


MERGED_MAPS = ("genesis_class_overrides", "cost_budgets", "window_reserves")


def set_policy(
    ctx: Context,
    changes: Mapping[str, Any],
    *,
    merge: Mapping[str, Mapping[str, Any]] | None = None,
    surface: str,
    actor: str | None,
) -> PolicyAudit | None:
    """The one policy change every surface makes: validate, write, audit, and — when anything
    moved — ask for a queue pass, since more slots, a smaller reserve, gating off, a genesis
    made priority or a changed cost budget can each free held work at once. `merge` names one
    of MERGED_MAPS and entries to merge onto it in force: `genesis_class_overrides` genesis ->
    class, `cost_budgets` runtime -> US dollars, `window_reserves` a per-model bucket -> its
    reserve %; a None value removes the entry (back to the default). One of them in `changes`
    replaces it whole."""
    with session_scope(ctx.engine) as db:
        wanted = dict(changes)
        for key, entries in (merge or {}).items():
            if key not in MERGED_MAPS:
                raise ValueError(f"{key!r} is not a policy map; one of {', '.join(MERGED_MAPS)}")
            if not entries:
                continue
            in_force = dict(wanted.get(key, getattr(ensure_policy(db), key)) or {})
            for name, value in entries.items():
                if value is None:
                    in_force.pop(name, None)
                else:
                    in_force[name] = value
            wanted[key] = in_force
        audit = change_policy(
            db, wanted, surface=surface, actor=actor, now=ctx.clock.now(), runtimes=ctx.limits.runtimes
        )
    if audit is not None:
        until = audit.changes.get("max_sessions_override_until", [None, None])[1]
        if until is not None:  # replacing a temporary value moves its expiry with it
            ctx.schedule(OVERRIDE_EXPIRY_JOB, datetime.fromisoformat(until), alarms.MAX_OVERRIDE_EXPIRED)
        request_queue_pass(ctx)
    return audit


def _check_temporary(coerced: dict[str, Any], row: Policy, now: datetime) -> None:
    """A temporary max sessions comes with its expiry, in the future and at most a week away;
    clearing it clears both (seed 000: "expiry or Clear resumes configured behavior")."""
    if "max_sessions_override" not in coerced and "max_sessions_override_until" not in coerced:
        return
    value = coerced.get("max_sessions_override", row.max_sessions_override)
    if value is None:
        coerced["max_sessions_override"] = coerced["max_sessions_override_until"] = None
        return
    until = coerced.get("max_sessions_override_until")
    if until is None or not now < until <= now + MAX_OVERRIDE_FOR:
        raise InvalidInput(
            error_text("policy/override_needs_expiry", most=MAX_OVERRIDE_FOR), field="max_sessions_override_until"
        )


def _stored(value: Any) -> Any:
    """A value as the audit's JSON keeps it."""
    return value.isoformat() if isinstance(value, datetime) else value


def expire_max_override(ctx: Context) -> bool:
    """The temporary max sessions' alarm: at its expiry the configured value is in force again,
    audited like any change. Lowering the cap stops nobody running (seed 000: non-preemptive)."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        row = ensure_policy(db)
        until = row.max_sessions_override_until
        if row.max_sessions_override is None or until is None or until > now:
            return False  # cleared or replaced since the alarm was armed
        audit = change_policy(db, {"max_sessions_override": None}, surface="expiry", actor=None, now=now)
    if audit is not None:
        request_queue_pass(ctx)
    return True


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def audit_log(db: DBSession, limit: int = 50) -> list[PolicyAudit]:
    stmt = select(PolicyAudit).order_by(PolicyAudit.id.desc()).limit(limit)  # type: ignore[union-attr]
    return list(db.exec(stmt))
