"""The provider's own word on the quota, read from one line of an agent's output. Pure: a line and
`now` in, readings out, so one table tests every shape (tests/integrations/test_provider_events.py).

    readings = provider_readings(line, now, account="acct-1")   # [] for any other line

Claude Code, `--output-format stream-json`, prints when a window's figures move:

    {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed_warning",
     "rateLimitType": "seven_day", "resetsAt": 1771390800, "utilization": 0.81,
     "isUsingOverage": false, "overageStatus": "rejected",
     "unifiedWindows": {"five_hour": {"utilization": 0.4, "resetsAt": 1771372800}, ...}}, ...}

`status` is one of allowed / allowed_warning / rejected and describes the window `rateLimitType`
names (five_hour, seven_day, seven_day_opus, seven_day_sonnet, seven_day_overage_included,
overage); `utilization` (0-1) is optional and often absent on `allowed` events; `unifiedWindows`
(CLI 2.1.258+, subscription accounts only) carries every window's utilization and reset on each
event. Field names as the CLI's own zod schema has them, quoted in meawoppl/rust-code-agent-sdks
PR #180 (`claude-codes/src/io/rate_limit.rs`), and as seen in anthropics/claude-code issues
#78476 and #77018 (no percentage on older events) and slopus/happy PR #1564.

Codex prints `token_count` events whose `rate_limits` hold `primary` and `secondary`, each
`{"used_percent": 0-100, "window_minutes": 300 | 10080, "resets_at": epoch seconds}` (older
builds: `resets_in_seconds`). Seen as `{"type": "event_msg", "payload": {"type": "token_count",
...}}` in its session files and `{"msg": {"type": "token_count", ...}}` in older `exec --json`
streams (openai/codex issues #9660, #14728; nightshift and codex-ratelimit read the same shape);
the newer `exec --json` ThreadEvent stream (codex-rs/exec/src/exec_events.rs) carries none, so a
Codex fleet on it stays on the ledger's figures. A Codex window is named by its length: 300
minutes is five_hour, 10,080 is seven_day, any other `<n>_minutes`.

Anything else — another event, a malformed line, a field of the wrong type — gives no reading,
or a reading without that field, and a reading left with no status, utilization or reset is
none: the stream is the agent's, never trusted to be well formed.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.ports import ProviderReading

ANTHROPIC, OPENAI = "anthropic", "openai"
STATUSES = frozenset({"allowed", "allowed_warning", "rejected"})
FIVE_HOUR, SEVEN_DAY = "five_hour", "seven_day"
# A window's length, by its kind: a kind not here is a weekly bucket when it says so.
PERIODS = {FIVE_HOUR: timedelta(hours=5), SEVEN_DAY: timedelta(days=7)}
CODEX_KINDS = {300: FIVE_HOUR, 10_080: SEVEN_DAY}
MARKERS = (b'"rate_limit_event"', b'"token_count"')  # a line without either is not parsed at all
_KIND = re.compile(r"^[a-z0-9_]{1,40}$")
_MILLISECONDS = 100_000_000_000  # an epoch past this is in milliseconds (the year 5138 in seconds)


def is_candidate(line: bytes) -> bool:
    """Whether a raw line may hold a provider event: a substring test, so a chatty agent costs
    no JSON parse for the lines that cannot."""
    return any(marker in line for marker in MARKERS)


def period_of(kind: str) -> timedelta | None:
    """How long a window of this kind lasts; None when the kind does not say."""
    if kind in PERIODS:
        return PERIODS[kind]
    if kind.startswith("seven_day"):
        return PERIODS[SEVEN_DAY]
    if kind.endswith("_minutes") and kind[: -len("_minutes")].isdigit():
        return timedelta(minutes=int(kind[: -len("_minutes")]))
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _instant(value: Any) -> datetime | None:
    seconds = _number(value)
    if seconds is None or seconds == 0:
        return None
    if seconds >= _MILLISECONDS:
        seconds /= 1000.0
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _kind(value: Any) -> str | None:
    return value if isinstance(value, str) and _KIND.match(value) else None


def _object(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _claude(info: dict[str, Any], now: datetime, account: str) -> list[ProviderReading]:
    found: dict[str, ProviderReading] = {}
    for name, window in (_object(info.get("unifiedWindows")) or {}).items():
        kind, fields = _kind(name), _object(window)
        if kind is None or fields is None:
            continue
        found[kind] = ProviderReading(
            ANTHROPIC, kind, now, utilization=_number(fields.get("utilization")),
            resets_at=_instant(fields.get("resetsAt")), account=account,
        )
    kind = _kind(info.get("rateLimitType"))
    if kind is not None:
        status = info.get("status")
        overage = info.get("overageStatus")
        using = info.get("isUsingOverage")
        known = found.get(kind)
        utilization = _number(info.get("utilization"))
        resets_at = _instant(info.get("resetsAt"))
        found[kind] = ProviderReading(
            ANTHROPIC, kind, now,
            status=status if status in STATUSES else None,
            utilization=utilization if utilization is not None else (known.utilization if known else None),
            resets_at=resets_at if resets_at is not None else (known.resets_at if known else None),
            is_using_overage=using if isinstance(using, bool) else None,
            overage_status=overage if isinstance(overage, str) and overage in STATUSES else None,
            account=account,
        )
    return list(found.values())


def _codex(limits: dict[str, Any], now: datetime, account: str) -> list[ProviderReading]:
    readings = []
    for slot in ("primary", "secondary"):
        window = _object(limits.get(slot))
        if window is None:
            continue
        minutes = _number(window.get("window_minutes"))
        if minutes is None or minutes != int(minutes) or minutes == 0:
            continue
        kind = CODEX_KINDS.get(int(minutes), f"{int(minutes)}_minutes")
        used = _number(window.get("used_percent"))
        resets_at = _instant(window.get("resets_at"))
        if resets_at is None and (after := _number(window.get("resets_in_seconds"))) is not None:
            resets_at = now + timedelta(seconds=after)
        readings.append(
            ProviderReading(
                OPENAI,
                kind,
                now,
                utilization=used / 100.0 if used is not None else None,
                resets_at=resets_at,
                account=account,
            )
        )
    return readings


def provider_readings(line: str | bytes, now: datetime, *, account: str = "default") -> list[ProviderReading]:
    """The quota readings one line of agent output states; [] for any other line."""
    raw = line if isinstance(line, bytes) else line.encode("utf-8", errors="replace")
    if not is_candidate(raw):
        return []
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth: not a ValueError
        return []
    if not isinstance(obj, dict):
        return []
    found: list[ProviderReading] = []
    if obj.get("type") == "rate_limit_event":
        info = _object(obj.get("rate_limit_info"))
        found = _claude(info, now, account) if info is not None else []
    for event in (obj, _object(obj.get("payload")), _object(obj.get("msg"))):
        if event is not None and event.get("type") == "token_count":
            limits = _object(event.get("rate_limits"))
            found = _codex(limits, now, account) if limits is not None else []
            break
    return [r for r in found if r.status is not None or r.utilization is not None or r.resets_at is not None]


def as_plain(reading: ProviderReading) -> dict[str, object]:
    """A reading as JSON-ready values, for a turn's record."""
    return {
        "provider": reading.provider,
        "kind": reading.kind,
        "status": reading.status,
        "utilization": reading.utilization,
        "resets_at": reading.resets_at.isoformat() if reading.resets_at else None,
        "is_using_overage": reading.is_using_overage,
        "account": reading.account,
    }


__all__ = [
    "ANTHROPIC",
    "FIVE_HOUR",
    "OPENAI",
    "SEVEN_DAY",
    "STATUSES",
    "as_plain",
    "is_candidate",
    "period_of",
    "provider_readings",
]
