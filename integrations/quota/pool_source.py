"""The pool quota source: per-account readings from a JSON file or an HTTP endpoint, averaged
by `scheduler.rules.pool`'s rules into the two windows the gate decides on.

    source = PoolSource(file="pool.json", spent_since=ledger.spent_since)   # or url=...
    reading = source.read(now)        # None: nothing to decide on (the gate fails open)

The format, the same from a file or an endpoint — a list of accounts, or {"accounts": [...]}:

    [{"name": "acct-1", "status": "active",                # active | quota_exceeded | needs_reauth
      "utilization_5h": 0.42, "utilization_7d": 0.91,      # 0-1 fraction (may exceed 1), or null
      "reset_5h": "2026-11-02T12:00:00+00:00",             # ISO-8601 with offset, or null
      "reset_7d": null,
      "capacity_5h_usd": 40.0, "capacity_7d_usd": 480.0}]  # optional: the account's price

Missing utilization and reset keys read as null. Names must be unique.

A window is priced (capacity in dollars) when every account averaged in it carries a capacity
— the pool's is their sum — or else once calibration against the ledger can measure it: the
ledger's spend since the window began, against the pooled utilization. Otherwise it stays in
fraction mode. A window's reset is the soonest recorded future reset among the accounts it
averaged, the next moment the pooled figure can fall; with none recorded it is now + period,
the latest any window of that length can roll over.

Anything unreadable — a missing file, a refused connection, a non-2xx answer, a body that is
not JSON or not this format — returns None and logs one WARNING line naming what was wrong
(once per distinct problem, so a source down for a day is not a line per gate decision).
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from scheduler.ports import AccountReading, QuotaReading, WindowReading
from scheduler.rules.calibration import Observation, calibrate, priced
from scheduler.rules.pool import ACCOUNT_STATUSES, PoolAverages, pool_utilization
from templates import error_text

log = logging.getLogger("pacer.quota.pool")

PERIODS = {"5h": timedelta(hours=5), "7d": timedelta(days=7)}
HTTP_TIMEOUT_SECONDS = 2.0
CALIBRATION_WINDOWS = 12  # window instances whose last observation calibration remembers


class PoolFormatError(ValueError):
    """The pool's JSON is not the documented format; the message names the field and the rule."""


@dataclass(frozen=True)
class PoolAccount:
    reading: AccountReading
    capacity_usd: Mapping[str, float]  # window name -> the account's dollar capacity, if given


def _number(where: str, value: Any, *, positive: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise PoolFormatError(
            error_text("pool_source/number", where=where, positive=positive, value=value, nullable=True)
        )
    if value < 0 or (positive and value == 0):
        raise PoolFormatError(
            error_text("pool_source/number", where=where, positive=positive, value=value, nullable=True)
        )
    return float(value)


def _instant(where: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PoolFormatError(error_text("pool_source/instant", where=where, value=value, offset_missing=False))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise PoolFormatError(
            error_text("pool_source/instant", where=where, value=value, offset_missing=False)
        ) from None
    if parsed.tzinfo is None:
        raise PoolFormatError(error_text("pool_source/instant", where=where, value=value, offset_missing=True))
    return parsed


def parse_accounts(data: Any) -> list[PoolAccount]:
    """The documented JSON (already decoded) as accounts, or PoolFormatError naming the field."""
    if isinstance(data, dict) and "accounts" in data:
        data = data["accounts"]
    if not isinstance(data, list):
        raise PoolFormatError(error_text("pool_source/top_level"))
    accounts: list[PoolAccount] = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        at = f"accounts[{i}]"
        if not isinstance(item, dict):
            raise PoolFormatError(error_text("pool_source/not_object", at=at, item=item))
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise PoolFormatError(error_text("pool_source/name_empty", at=at, name=name))
        if name in seen:
            raise PoolFormatError(error_text("pool_source/name_twice", at=at, name=name))
        seen.add(name)
        status = item.get("status")
        if status not in ACCOUNT_STATUSES:
            raise PoolFormatError(
                error_text("pool_source/status", at=at, status=status, allowed=list(ACCOUNT_STATUSES))
            )
        reading = AccountReading(
            name=name,
            status=status,
            utilization_5h=_number(f"{at}.utilization_5h", item.get("utilization_5h")),
            utilization_7d=_number(f"{at}.utilization_7d", item.get("utilization_7d")),
            reset_5h=_instant(f"{at}.reset_5h", item.get("reset_5h")),
            reset_7d=_instant(f"{at}.reset_7d", item.get("reset_7d")),
        )
        capacity = {
            window: value
            for window in PERIODS
            if (value := _number(f"{at}.capacity_{window}_usd", item.get(f"capacity_{window}_usd"), positive=True))
            is not None
        }
        accounts.append(PoolAccount(reading, capacity))
    return accounts


class PoolSource:
    """QuotaSource over per-account readings. Give exactly one of `file` or `url`."""

    def __init__(
        self,
        *,
        file: str | Path | None = None,
        url: str | None = None,
        spent_since: Callable[[datetime, datetime], float] | None = None,
        timeout: float = HTTP_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if (file is None) == (url is None):
            raise ValueError("PoolSource needs exactly one of file= or url=")
        self.file = Path(file) if file is not None else None
        self.url = url
        self.where = str(self.file) if self.file is not None else str(url)
        self.spent_since = spent_since
        self.timeout = timeout
        self.transport = transport
        # window name -> {that window instance's reset: its latest observation}
        self._observations: dict[str, dict[datetime, Observation]] = {w: {} for w in PERIODS}
        self._order: dict[str, deque[datetime]] = {w: deque() for w in PERIODS}
        self._last_problem: str | None = None

    def _fetch(self) -> Any:
        if self.file is not None:
            return json.loads(self.file.read_text())
        assert self.url is not None
        with httpx.Client(timeout=self.timeout, transport=self.transport) as client:
            response = client.get(self.url, headers={"Accept": "application/json"})
            response.raise_for_status()
            return response.json()

    def accounts(self) -> list[PoolAccount] | None:
        """The accounts as the source reports them now, or None (logged) when unreadable."""
        try:
            accounts = parse_accounts(self._fetch())
        except PoolFormatError as exc:
            self._problem(str(exc))
            return None
        except (OSError, ValueError, httpx.HTTPError) as exc:
            # JSONDecodeError is a ValueError; HTTPStatusError names the status and the URL.
            self._problem(f"{type(exc).__name__}: {exc}")
            return None
        return accounts

    def _problem(self, what: str) -> None:
        level = logging.DEBUG if what == self._last_problem else logging.WARNING
        log.log(level, "pool quota source %s unreadable (failing open): %s", self.where, what)
        self._last_problem = what

    def read(self, now: datetime) -> QuotaReading | None:
        accounts = self.accounts()
        if accounts is None:
            return None
        readings = [a.reading for a in accounts]
        averages = pool_utilization(readings, now=now)
        if averages is None:
            self._problem(f"none of {len(readings)} accounts has a readable window")
            return None
        self._last_problem = None
        windows = [w for name in PERIODS if (w := self._window(name, accounts, averages, now))]
        return QuotaReading(
            windows=windows, accounts=readings, accounts_averaged=averages.averaged, read_at=now
        )

    def _window(
        self, name: str, accounts: list[PoolAccount], averages: PoolAverages, now: datetime
    ) -> WindowReading | None:
        utilization = averages.utilization_5h if name == "5h" else averages.utilization_7d
        if utilization is None:
            return None
        period = PERIODS[name]
        resets_at = (averages.next_reset_5h if name == "5h" else averages.next_reset_7d) or now + period
        window = WindowReading(name, period.total_seconds(), utilization, resets_at, None)
        averaged = set(averages.names_5h if name == "5h" else averages.names_7d)
        return priced(window, self._capacity(name, accounts, averaged, window, now))

    def _capacity(
        self, name: str, accounts: list[PoolAccount], averaged: set[str], window: WindowReading, now: datetime
    ) -> float | None:
        members = [a for a in accounts if a.reading.name in averaged]
        if members and all(name in a.capacity_usd for a in members):
            return sum(a.capacity_usd[name] for a in members)
        if self.spent_since is None:
            return None
        start = window.resets_at - timedelta(seconds=window.period_seconds)
        if start < now:
            self._observe(name, window.resets_at, Observation(self.spent_since(start, now), window.utilization))
        return calibrate(self._observations[name].values())

    def _observe(self, name: str, instance: datetime, observation: Observation) -> None:
        """Keep the latest observation of each window instance (the fullest window has the least
        rounding error), for the last CALIBRATION_WINDOWS instances."""
        kept, order = self._observations[name], self._order[name]
        if instance not in kept:
            order.append(instance)
            if len(order) > CALIBRATION_WINDOWS:
                kept.pop(order.popleft(), None)
        kept[instance] = observation


__all__ = ["PoolAccount", "PoolFormatError", "PoolSource", "parse_accounts"]
