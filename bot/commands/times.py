"""Times a person types: `15:30` (its next occurrence, UTC), `2h` / `90m` / `1d` / `1h30m`, or
an ISO-8601 instant. Pure: parsing yields a spec, and `at(now)` resolves it against a `now`
the caller read once at the edge, so the same words give the same instant in a test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from scheduler.errors import InvalidInput
from templates import error_text

# A duration past a year is a typo, and the bound keeps timedelta arithmetic from overflowing.
MAX_DURATION = timedelta(days=366)

_DURATION = re.compile(r"(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?", re.ASCII | re.IGNORECASE)
_CLOCK = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)", re.ASCII)
# fromisoformat is generous (week dates, ordinal dates); a person's instant starts with a date.
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:.,]+(?:Z|[+-]\d{2}:?\d{2})?)?", re.ASCII | re.IGNORECASE)


@dataclass(frozen=True)
class After:
    """A duration from now: `2h`."""

    delta: timedelta

    def at(self, now: datetime) -> datetime:
        return now + self.delta

    def __str__(self) -> str:
        return format_duration(self.delta)


@dataclass(frozen=True)
class ClockTime:
    """`15:30`: the next time the UTC clock shows it, today or tomorrow."""

    hour: int
    minute: int

    def at(self, now: datetime) -> datetime:
        today = now.astimezone(UTC).replace(hour=self.hour, minute=self.minute, second=0, microsecond=0)
        return today if today > now else today + timedelta(days=1)

    def __str__(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d} UTC"


@dataclass(frozen=True)
class Instant:
    """An ISO-8601 instant; one written without an offset is read as UTC."""

    when: datetime

    def at(self, now: datetime) -> datetime:
        return self.when

    def __str__(self) -> str:
        return self.when.strftime("%Y-%m-%d %H:%M UTC")


TimeSpec = After | ClockTime | Instant


def _shown(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:37] + "...")


def parse_duration(token: str, *, field: str) -> timedelta:
    """`2h`, `90m`, `1d`, `1h30m`: positive and at most MAX_DURATION."""
    match = _DURATION.fullmatch(token)
    if not token or match is None or not any(match.groups()):
        raise InvalidInput(error_text("times/not_a_duration", field=field, token=_shown(token)), field=field)
    days, hours, minutes = (int(g) if g else 0 for g in match.groups())
    if days > MAX_DURATION.days or hours > MAX_DURATION.days * 24 or minutes > MAX_DURATION.days * 1440:
        raise InvalidInput(
            error_text("times/too_long", field=field, token=_shown(token), days=MAX_DURATION.days), field=field
        )
    delta = timedelta(days=days, hours=hours, minutes=minutes)
    if delta <= timedelta(0):
        raise InvalidInput(error_text("times/not_positive", field=field, token=_shown(token)), field=field)
    if delta > MAX_DURATION:
        raise InvalidInput(
            error_text("times/too_long", field=field, token=_shown(token), days=MAX_DURATION.days), field=field
        )
    return delta


def parse_time(token: str, *, field: str) -> TimeSpec:
    """One of the three forms; anything else names the field and the forms allowed."""
    clock = _CLOCK.fullmatch(token)
    if clock:
        return ClockTime(int(clock.group(1)), int(clock.group(2)))
    duration = _DURATION.fullmatch(token)
    if duration is not None and any(duration.groups()):
        return After(parse_duration(token, field=field))
    if _ISO.fullmatch(token):
        try:
            when = datetime.fromisoformat(token.upper())
        except ValueError:
            raise InvalidInput(error_text("times/not_a_date", field=field, token=_shown(token)), field=field) from None
        return Instant(when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC))
    raise InvalidInput(error_text("times/not_a_time", field=field, token=_shown(token)), field=field)


def resolve(spec: TimeSpec, now: datetime, *, field: str) -> datetime:
    """The instant `spec` names, which must lie ahead of `now` and within MAX_DURATION of it."""
    when = spec.at(now)
    if when <= now:
        raise InvalidInput(error_text("times/in_the_past", field=field, spec=spec), field=field)
    if when - now > MAX_DURATION:
        raise InvalidInput(error_text("times/too_far", field=field, spec=spec, days=MAX_DURATION.days), field=field)
    return when


def parse_when(token: str, now: datetime, *, field: str) -> datetime:
    """Parse and resolve in one step, for callers holding a single token and a `now`."""
    return resolve(parse_time(token, field=field), now, field=field)


def format_duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{mins}m" if mins else ""]
    return "".join(parts) or "0m"
