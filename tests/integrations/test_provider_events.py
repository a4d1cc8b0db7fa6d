"""The provider's word on the quota, read from an agent's stream: the pure parser (one table), the
line splitter, and a stand-in `claude` run through the real command runner."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrations.runners.command import CommandRunner
from integrations.runners.provider_events import period_of, provider_readings
from integrations.runners.streams import LINE_BYTES, Lines, ProviderWatch
from scheduler.ports import Outcome, ProviderReading, TurnRequest
from scheduler.testing import VirtualClock
from tests.support.paths import FIXTURES

FAKE = FIXTURES / "fake_claude.py"
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
T = 1_796_000_000  # an epoch second after NOW
AT = datetime.fromtimestamp(T, UTC)


def event(**info: object) -> str:
    return json.dumps({"type": "rate_limit_event", "rate_limit_info": info, "uuid": "u", "session_id": "s"})


def reading(kind: str, provider: str = "anthropic", **kw: object) -> ProviderReading:
    return ProviderReading(provider, kind, NOW, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # Claude Code, as the CLI prints it: status and reset, utilization where present.
        (
            event(
                status="allowed",
                resetsAt=T,
                rateLimitType="five_hour",
                utilization=0.8,
                overageStatus="rejected",
                isUsingOverage=False,
            ),
            [
                reading(
                    "five_hour",
                    status="allowed",
                    utilization=0.8,
                    resets_at=AT,
                    is_using_overage=False,
                    overage_status="rejected",
                )
            ],
        ),
        (
            event(status="rejected", resetsAt=T, rateLimitType="seven_day_opus"),
            [reading("seven_day_opus", status="rejected", resets_at=AT)],
        ),
        (
            event(
                status="allowed_warning", resetsAt=T * 1000, rateLimitType="seven_day", isUsingOverage=True
            ),  # milliseconds
            [reading("seven_day", status="allowed_warning", resets_at=AT, is_using_overage=True)],
        ),
        # unifiedWindows: every window on each event; the named window takes its status from the top.
        (
            event(
                status="allowed",
                rateLimitType="five_hour",
                unifiedWindows={
                    "five_hour": {"utilization": 0.4, "resetsAt": T},
                    "seven_day": {"utilization": 1.02, "resetsAt": T + 60},
                },
            ),
            [
                reading("five_hour", status="allowed", utilization=0.4, resets_at=AT),
                reading("seven_day", utilization=1.02, resets_at=AT + timedelta(seconds=60)),
            ],
        ),
        # Fields of the wrong type are left out, never guessed.
        (event(status="maybe", resetsAt="soon", rateLimitType="five_hour", utilization=True, isUsingOverage="no"), []),
        (
            event(status="allowed", resetsAt=-5, rateLimitType="five_hour", utilization=float("nan")),
            [reading("five_hour", status="allowed")],
        ),
        (event(status="rejected", resetsAt=T), []),  # no window named
        (event(status="rejected", rateLimitType="Five Hour; rm -rf"), []),  # not a kind
        (json.dumps({"type": "rate_limit_event", "rate_limit_info": None}), []),
        (json.dumps({"type": "rate_limit_event"}), []),
        ('{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":17', []),  # cut short
        # Codex: token_count's rate_limits, wherever the stream wraps it; percent to a fraction.
        (
            json.dumps(
                {
                    "type": "event_msg",
                    "payload": {
                        "type": "token_count",
                        "info": None,
                        "rate_limits": {
                            "primary": {"used_percent": 7.0, "window_minutes": 300, "resets_at": T},
                            "secondary": {"used_percent": 77.0, "window_minutes": 10080, "resets_at": T + 60},
                        },
                    },
                }
            ),
            [
                reading("five_hour", "openai", utilization=0.07, resets_at=AT),
                reading("seven_day", "openai", utilization=0.77, resets_at=AT + timedelta(seconds=60)),
            ],
        ),
        (
            json.dumps(
                {
                    "id": "0",
                    "msg": {
                        "type": "token_count",
                        "rate_limits": {
                            "primary": {"used_percent": 50, "window_minutes": 60, "resets_in_seconds": 600}
                        },
                    },
                }
            ),
            [reading("60_minutes", "openai", utilization=0.5, resets_at=NOW + timedelta(minutes=10))],
        ),
        (
            json.dumps(
                {"type": "token_count", "rate_limits": {"primary": {"used_percent": 5, "window_minutes": "300"}}}
            ),
            [],
        ),
        (json.dumps({"type": "token_count", "rate_limits": None}), []),
        # Everything else.
        ('{"type":"assistant","message":{"content":"rate_limit_event is a word"}}', []),
        ('["rate_limit_event"]', []),
        ("not json at all", []),
        ("", []),
    ],
)
def test_provider_readings(line: str, expected: list[ProviderReading]) -> None:
    assert provider_readings(line, NOW) == expected


def test_a_reading_names_the_account_it_came_from() -> None:
    (one,) = provider_readings(event(status="allowed", rateLimitType="five_hour"), NOW, account="acct-2")
    assert one.account == "acct-2"


@pytest.mark.parametrize(
    ("kind", "period"),
    [("five_hour", timedelta(hours=5)), ("seven_day", timedelta(days=7)), ("seven_day_sonnet", timedelta(days=7)),
     ("90_minutes", timedelta(minutes=90)), ("overage", None), ("x_minutes", None)],
)
def test_period_of(kind: str, period: timedelta | None) -> None:
    assert period_of(kind) == period


def test_lines_are_split_across_chunks_and_an_overlong_line_is_dropped_whole() -> None:
    seen: list[bytes] = []
    lines = Lines(seen.append)
    for chunk in (b"one\ntw", b"o\n", b"x" * (LINE_BYTES + 10), b"y" * 10, b"\nthree\nfour"):
        lines.feed(chunk)
    lines.close()
    assert seen == [b"one", b"two", b"three", b"four"]


def test_a_failing_sink_does_not_stop_the_watch() -> None:
    def broken(reading: ProviderReading) -> None:
        raise RuntimeError("database down")

    watch = ProviderWatch(broken, account="a", clock=VirtualClock(NOW))
    watch.lines.feed((event(status="rejected", rateLimitType="five_hour", resetsAt=T) + "\n").encode())
    assert watch.latest["five_hour"].status == "rejected"


# --------------------------------------------------------------------------- the real runner


def runner(tmp_path: Path, heard: list[ProviderReading], **kw: object) -> CommandRunner:
    return CommandRunner(
        f"{shlex.quote(sys.executable)} {FAKE} -p {{prompt}} --output-format stream-json",
        "--resume {agent_session_id}", "claude_code", 30, tmp_path / "work",
        env={"PATH": "/usr/bin:/bin"}, provider_sink=heard.append, account="acct-1", **kw,  # type: ignore[arg-type]
    )


def turn(prompt: str, turn_id: int = 1) -> TurnRequest:
    return TurnRequest(session_id=3, turn_id=turn_id, prompt=prompt, runtime="claude_code")


def test_a_rate_limit_event_reaches_the_sink_while_the_turn_still_runs(tmp_path: Path) -> None:
    heard: list[ProviderReading] = []
    agent = runner(tmp_path, heard)
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (
            agent.run(turn(f"[fake:stream][fake:rate=allowed:0.8:{T}:five_hour][fake:slow=30]")),
            done.set(),
        )
    )
    started = time.monotonic()
    thread.start()
    while not heard and time.monotonic() - started < 5:
        time.sleep(0.01)
    assert time.monotonic() - started < 5 and not done.is_set()  # heard mid-turn, not at its end
    assert [(r.kind, r.status, r.utilization, r.resets_at, r.account) for r in heard] == [
        ("five_hour", "allowed", 0.8, AT, "acct-1")
    ]
    agent.halt(1)
    thread.join(10)


def test_malformed_lines_are_ignored_and_the_result_still_read(tmp_path: Path) -> None:
    heard: list[ProviderReading] = []
    result = runner(tmp_path, heard).run(
        turn(f"[fake:stream][fake:garbage][fake:rate=allowed_warning:-:{T}:seven_day]")
    )
    assert result.outcome is Outcome.SUCCESS and result.cost_usd == 0.0123
    assert [(r.kind, r.status, r.utilization) for r in heard] == [("seven_day", "allowed_warning", None)]
    assert result.extra["provider_readings"][0]["kind"] == "seven_day"


def test_codex_token_counts_reach_the_sink(tmp_path: Path) -> None:
    heard: list[ProviderReading] = []
    runner(tmp_path, heard).run(turn(f"[fake:codex=12:64:{T}]"))
    assert [(r.provider, r.kind, r.utilization) for r in heard] == [
        ("openai", "five_hour", 0.12),
        ("openai", "seven_day", 0.64),
    ]


def test_a_turn_that_fails_after_a_rejected_reading_is_a_rate_limit_until_its_reset(tmp_path: Path) -> None:
    heard: list[ProviderReading] = []
    result = runner(tmp_path, heard).run(
        turn(f"[fake:stream][fake:rate=rejected:1.0:{T}:seven_day_opus][fake:error=something broke]")
    )
    assert result.outcome is Outcome.RATE_LIMITED
    assert result.rate_limit_reset_at == AT
    assert result.extra["rate_limit_kinds"] == ["seven_day_opus"]
