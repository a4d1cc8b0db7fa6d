"""What a CLI agent said, read: its JSON report, and the outcome class the queue holds act on.

Pure: text and `now` in, values out, so one table tests every class (tests/integrations/test_runners.py).

    report = parse_report(stdout)            # Claude Code's JSON result, or None
    outcome, reset_at, error = classify(exit_code, stdout, stderr, report, now)

Claude Code's `--output-format json` prints one object; `--output-format stream-json` prints one
object a line and the last `"type": "result"` line is the report. Either is accepted. A stream's
first line, `"subtype": "init"`, names the agent's session before any result
(`announced_session`).

The classes, checked in this order because provider messages overlap — Anthropic answers an
empty credit balance with a 400 invalid_request_error, so credits must win over "invalid
request", and a per-minute "quota exceeded" is a rate limit, not billing:

    MODEL_ACCESS       the plan does not include the chosen model ("Claude Opus is not available
                       with the Claude Pro plan"); a model the API key cannot use stays FAILED
    AUTH_REJECTED      401, invalid api key, authentication, please run /login, oauth token
    CREDITS_EXHAUSTED  credit balance is too low, insufficient credit/quota, quota exceeded
    RATE_LIMITED       rate limit, 429, usage limit, hit your limit (+ the stated reset, if any)
    FAILED             400, invalid request, model not found, does not have access
    UNREACHABLE        connection reset/refused, DNS failures, network unreachable: the provider
                       was never reached (seed 002: six of these in a row are a task failure)
    FAILED_RETRYABLE   anything else that failed: other exits, 5xx, overloaded

Seed 002's table is why the split matters: a rate limit waits out the provider's reset and spends
no retry, auth and credits stop the queue until a person acts, a failed task blocks at once.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scheduler.ports import Outcome
from templates import render

DETAIL_CHARS = 500  # the provider's words kept in a turn's error; holds quote them
SCAN_CHARS = 65_536  # error text searched for a class; errors sit at the end of the output

# A session id the agent reports is fed back as `--resume {agent_session_id}`: one that began
# with "-" would be read as an option, so only plain identifiers are accepted.
AGENT_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,127}$")


@dataclass(frozen=True)
class AgentReport:
    """The fields of Claude Code's JSON result that Pacer records; None when absent or malformed."""

    is_error: bool = False
    result: str | None = None
    session_id: str | None = None
    cost_usd: float | None = None
    duration_ms: int | None = None
    subtype: str | None = None


def _status(code: int, reason: str) -> str:
    """An HTTP status as providers write it ("API Error: 429", "status 401", "429 Too Many")."""
    return rf"(?:\b(?:api error|error|status|status code|http|code)[\s:=]*{code}\b|\b{code}\s+{reason})"


_MODEL_ACCESS = re.compile(
    "|".join(
        [
            r"\bnot (?:available|included) (?:with|on|in) (?:your|the) [\w .-]{0,40}?(?:plan|subscription)\b",
            r"\b(?:plan|subscription) (?:does not|doesn't|do not|don't) (?:include|support|cover|allow)\b",
            r"\bupgrade your (?:plan|subscription) to (?:use|access)\b",
        ]
    ),
    re.IGNORECASE,
)
# How the refusal names the model: an id, the words before "is not available", or after "include".
_MODEL_ID = re.compile(r"\b((?:claude|gpt|gemini|codex)-[\w.-]*\w)", re.IGNORECASE)
_MODEL_BEFORE = re.compile(r"\b([A-Z][\w.-]*(?: [\w.-]+){0,3}?) (?:is|are) not (?:available|included)\b")
_MODEL_AFTER = re.compile(
    r"\b(?:include|support|cover|allow)s? (?:access to |use of )?(?:the )?(?!(?:this|that|it|any|your|access|use)\b)"
    r"(\w[\w-]*(?:\.\w+)*(?: \w[\w-]*(?:\.\w+)*){0,2}?)"
    r"(?: models?)?(?:[,;:!]|\.(?!\w)|$)",
    re.IGNORECASE | re.MULTILINE,
)
_MODEL_OPTION = re.compile(r"^--model(?:=(.+))?$")

_AUTH = re.compile(
    "|".join(
        [
            _status(401, "unauthorized"),
            r"invalid (?:x-)?api[ _-]?key",
            r"authentication",
            r"please run /login",
            r"oauth token",
            r"not logged in",
        ]
    ),
    re.IGNORECASE,
)
_CREDITS = re.compile(
    r"credit balance is too low|insufficient[ _-]?(?:credit|funds|quota)|"
    r"exceeded your current quota|quota exceeded",
    re.IGNORECASE,
)
# Words that make a "quota exceeded" a throughput limit rather than an empty account.
_PER_INTERVAL = re.compile(r"\bper (?:second|minute|hour|day)\b|\brequests? per\b", re.IGNORECASE)
_RATE = re.compile(
    "|".join(
        [
            _status(429, "too many requests"),
            r"rate[ _-]?limit",
            r"usage limit",
            r"hit your (?:session |weekly )?limit",
            r"too many requests",
        ]
    ),
    re.IGNORECASE,
)
_FATAL = re.compile(
    "|".join(
        [
            _status(400, "bad request"),
            r"invalid[ _]request",
            r"model[ _]not[ _]found",
            r"not[ _]found[ _]error.{0,40}model",
            r"does not have access",
        ]
    ),
    re.IGNORECASE | re.DOTALL,
)

_UNREACHABLE = re.compile(
    r"connection (?:reset|refused|error|closed)|econnreset|econnrefused|etimedout|enotfound|eai_again|"
    r"socket hang up|fetch failed|network (?:error|is unreachable)|apiconnectionerror|"
    r"could not resolve host|getaddrinfo|name or service not known|temporary failure in name resolution|"
    r"failed to connect|no route to host",
    re.IGNORECASE,
)

_EPOCH_RESET = re.compile(r"limit reached\|(\d{9,11})\b", re.IGNORECASE)
_ISO_RESET = re.compile(
    r"(?:resets?|retry|try again)\s+(?:at|on|after)?\s*"
    r"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)",
    re.IGNORECASE,
)
_LOCAL_RESET = re.compile(
    r"resets?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)\s*\(([A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\)",
    re.IGNORECASE,
)
_RELATIVE_RESET = re.compile(
    r"(?:(?:try again|retry|resets?)\s+(?:in|after)\s+|retry-after:?\s*)(\d+(?:\.\d+)?)\s*"
    r"(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)?\b",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"ms": 0.001, "mi": 0.001, "s": 1, "m": 60, "h": 3600}


def _amount(value: Any) -> float | None:
    """A finite, non-negative JSON number; None for anything else (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _report_from(obj: dict[str, Any]) -> AgentReport:
    session = obj.get("session_id")
    result = obj.get("result")
    subtype = obj.get("subtype")
    duration = _amount(obj.get("duration_ms"))
    return AgentReport(
        is_error=obj.get("is_error") is True,
        result=result if isinstance(result, str) else None,
        session_id=session if isinstance(session, str) and AGENT_SESSION_ID.match(session) else None,
        cost_usd=_amount(obj.get("total_cost_usd", obj.get("cost_usd"))),
        duration_ms=int(duration) if duration is not None else None,
        subtype=subtype if isinstance(subtype, str) else None,
    )


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # nested past the parser's depth: not a ValueError
        return None
    return value if isinstance(value, dict) else None


def _is_report(obj: dict[str, Any] | None) -> bool:
    # Another tool's JSON is its output, not a report: keep it as text.
    return obj is not None and (obj.get("type") == "result" or "total_cost_usd" in obj or "is_error" in obj)


def parse_report(stdout: str) -> AgentReport | None:
    """The agent's JSON result: one object, or the last `"type": "result"` line of a stream."""
    text = stdout.strip()
    whole = _json_object(text) if text.startswith("{") else None
    if whole is not None:
        return _report_from(whole) if _is_report(whole) else None
    # Line by line from the end: a stream, or a bounded capture whose head was cut off.
    for line in reversed(text.splitlines()):
        obj = _json_object(line.strip()) if line.strip().startswith("{") else None
        if obj is not None and _is_report(obj):
            return _report_from(obj)
    return None


def announced_session(line: str) -> str | None:
    """The agent's own session id when one line of its output states it: Claude Code's stream-json
    init line (`"type": "system", "subtype": "init"`, its first) or its result; else None.
    Another tool's JSON is its output, so only those two kinds of line count."""
    text = line.strip()
    obj = _json_object(text) if text.startswith("{") else None
    if obj is None or not ((obj.get("type") == "system" and obj.get("subtype") == "init") or _is_report(obj)):
        return None
    return _report_from(obj).session_id


def announced_model(line: str) -> str | None:
    """The model Claude Code's stream-json init line says the turn runs on; else None."""
    text = line.strip()
    obj = _json_object(text) if text.startswith("{") else None
    if obj is None or not (obj.get("type") == "system" and obj.get("subtype") == "init"):
        return None
    model = obj.get("model")
    return model if isinstance(model, str) and MODEL_NAME.match(model) else None


def _next_local(hour: int, minute: int, zone: ZoneInfo, now: datetime) -> datetime:
    """The next time the clock in `zone` reads hour:minute, strictly after now."""
    local_now = now.astimezone(zone)
    for days in (0, 1, 2):
        day = local_now.date() + timedelta(days=days)
        candidate = datetime.combine(day, time(hour, minute), tzinfo=zone)
        if candidate > local_now:
            return candidate.astimezone(UTC)
    return datetime.combine(date.max, time(), tzinfo=UTC)  # unreachable: a day always has one


def parse_reset(text: str, now: datetime) -> datetime | None:
    """The reset a rate-limit message states, as a UTC instant after now; None when it states none.

    Understood: Claude Code's "usage limit reached|<epoch>", "resets at 2026-11-30T14:00:00Z",
    "resets 4pm (Europe/Paris)", "try again in 15 minutes", "reset in 3600 seconds",
    "retry-after: 120".
    """
    candidates: list[datetime] = []
    if m := _EPOCH_RESET.search(text):
        candidates.append(datetime.fromtimestamp(int(m.group(1)), UTC))
    if m := _ISO_RESET.search(text):
        try:
            stamp = datetime.fromisoformat(m.group(1).replace(" ", "T"))
            candidates.append(stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC))
        except ValueError:
            pass
    if m := _LOCAL_RESET.search(text):
        hour, minute = int(m.group(1)) % 12, int(m.group(2) or 0)
        hour += 12 if m.group(3).lower() == "pm" else 0
        try:
            if minute < 60:
                candidates.append(_next_local(hour, minute, ZoneInfo(m.group(4)), now))
        except (ZoneInfoNotFoundError, ValueError):
            pass
    if m := _RELATIVE_RESET.search(text):
        word = (m.group(2) or "s").lower()
        unit = word[:2] if word.startswith(("ms", "milli")) else word[0]
        candidates.append(now + timedelta(seconds=float(m.group(1)) * _UNIT_SECONDS[unit]))
    future = [c.astimezone(UTC) for c in candidates if c > now]
    return future[0] if future else None


def _detail(text: str) -> str:
    """The provider's words for a turn's error: the last non-empty lines, bounded."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    detail = " ".join(lines[-3:])
    return detail if len(detail) <= DETAIL_CHARS else "…" + detail[-(DETAIL_CHARS - 1) :]


def classify(
    exit_code: int,
    stdout: str,
    stderr: str,
    parsed: AgentReport | None,
    now: datetime,
) -> tuple[Outcome, datetime | None, str | None]:
    """The outcome of a finished agent process: (outcome, rate_limit_reset_at, error sentence).

    A zero exit is a success unless the JSON report says is_error. Anything else is classified
    by the error text (the report's result, stderr, and stdout when it was not a report).
    """
    failed = exit_code != 0 or (parsed is not None and parsed.is_error)
    if not failed:
        return Outcome.SUCCESS, None, None
    parts = [stderr[-SCAN_CHARS:]]
    if parsed is not None and parsed.is_error and parsed.result:
        parts.insert(0, parsed.result[-SCAN_CHARS:])
    if parsed is None:
        parts.append(stdout[-SCAN_CHARS:])
    haystack = "\n".join(p for p in parts if p.strip())
    detail = _detail(haystack)

    outcome = Outcome.FAILED_RETRYABLE
    reset_at: datetime | None = None
    if _MODEL_ACCESS.search(haystack):
        outcome = Outcome.MODEL_ACCESS
    elif _AUTH.search(haystack):
        outcome = Outcome.AUTH_REJECTED
    elif _CREDITS.search(haystack) and not _PER_INTERVAL.search(haystack):
        outcome = Outcome.CREDITS_EXHAUSTED
    elif _RATE.search(haystack) or _CREDITS.search(haystack):
        outcome = Outcome.RATE_LIMITED
        reset_at = parse_reset(haystack, now)
    elif _FATAL.search(haystack):
        outcome = Outcome.FAILED
    elif _UNREACHABLE.search(haystack):
        outcome = Outcome.UNREACHABLE

    if exit_code < 0:
        error = render("text/runner_error.j2", kind="signal", signal=-exit_code, detail=detail)
    elif exit_code == 0:
        said = detail or (parsed.subtype if parsed is not None and parsed.subtype else "is_error")
        error = render("text/runner_error.j2", kind="reported", detail=said)
    else:
        error = render("text/runner_error.j2", kind="exit", code=exit_code, detail=detail)
    return outcome, reset_at, error


def refused_model(error: str) -> str | None:
    """The model a plan refusal names, as the provider wrote it; None when it names none."""
    for pattern in (_MODEL_ID, _MODEL_BEFORE, _MODEL_AFTER):
        if m := pattern.search(error):
            return m.group(1).strip()
    return None


def model_option(words: list[str]) -> str | None:
    """The model a runtime's command chooses with `--model X` or `--model=X`; None when it lets
    the agent choose."""
    for index, word in enumerate(words):
        if m := _MODEL_OPTION.match(word):
            if m.group(1):
                return m.group(1)
            return words[index + 1] if index + 1 < len(words) else None
    return None


__all__ = [
    "AGENT_SESSION_ID",
    "AgentReport",
    "announced_model",
    "announced_session",
    "classify",
    "model_option",
    "parse_report",
    "parse_reset",
    "refused_model",
]
