"""The agents quota source: the provider's readings, kept per (account, window) in a real
database, read back as the gate's windows, the ledger standing in (and saying why) where the
provider has not spoken; a stand-in `claude` run through the real command runner feeds it, and a
`rejected` reading holds spot work until the provider's reset while priority work runs."""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.config.settings import load
from bot.runtime.adapters import build_quota_source
from integrations.quota.agents import AgentsSource, ReadingBook
from integrations.quota.ledger import LedgerSource
from integrations.runners.command import CommandRunner
from scheduler.engine.turns import submit_turn
from scheduler.ports import ProviderReading, TurnRequest
from scheduler.rules.provider_windows import Fallback, Measured, measure
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Turn
from scheduler.testing import VirtualClock
from tests.support.harness import build, new, row
from tests.support.paths import FIXTURES

FAKE = FIXTURES / "fake_claude.py"
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
FIVE = 5 * H


def said(kind: str = "five_hour", *, account: str = "a", at: datetime = NOW, **kw: object) -> ProviderReading:
    return ProviderReading("anthropic", kind, at, account=account, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("rule", "readings", "expected"),
    [
        ("nothing heard", [], Fallback.NO_READING),
        ("another window heard", [said("seven_day", utilization=0.3, resets_at=NOW + H)], Fallback.NO_READING),
        ("heard before the reset that has passed", [said(utilization=0.9, resets_at=NOW - H)], Fallback.ROLLED_OVER),
        ("no reset named, heard over a period ago", [said(utilization=0.9, at=NOW - 6 * H)], Fallback.ROLLED_OVER),
        ("named but not how full", [said(status="allowed", resets_at=NOW + H)], Fallback.NO_UTILIZATION),
        (
            "one account",
            [said(utilization=0.8, resets_at=NOW + H, status="allowed")],
            Measured(0.8, NOW + H, "anthropic", 1, 1, False, False, False),
        ),
        (
            "rejected without a figure is spent",
            [said(status="rejected", resets_at=NOW + 2 * H)],
            Measured(1.0, NOW + 2 * H, "anthropic", 1, 1, True, False, False),
        ),
        (
            "two accounts average; the soonest reset",
            [
                said(utilization=0.2, resets_at=NOW + 2 * H, account="a"),
                said(utilization=0.6, resets_at=NOW + H, account="b", status="allowed_warning"),
            ],
            Measured(0.4, NOW + H, "anthropic", 2, 2, False, True, False),
        ),
        (
            "accounts that move together are one bucket",
            [
                said(utilization=0.9, resets_at=NOW + H, account="a"),
                said(utilization=0.9, resets_at=NOW + H, account="b"),
                said(utilization=0.3, resets_at=NOW + 3 * H, account="c", is_using_overage=True),
            ],
            Measured(0.6, NOW + H, "anthropic", 3, 2, False, False, True),
        ),
        (
            "a stale account counts for nothing",
            [
                said(utilization=0.9, resets_at=NOW - H, account="a"),
                said(utilization=0.1, resets_at=NOW + H, account="b"),
            ],
            Measured(0.1, NOW + H, "anthropic", 1, 1, False, False, False),
        ),
    ],
)
def test_measure(rule: str, readings: list[ProviderReading], expected: Measured | Fallback) -> None:
    assert measure(readings, "five_hour", FIVE, NOW) == expected, rule


# --------------------------------------------------------------------------- the book and the source


def ledger(engine: Engine) -> LedgerSource:
    return LedgerSource(engine, capacity_5h_usd=50, capacity_7d_usd=600, anchor=datetime(2026, 1, 5, tzinfo=UTC))


def spend(engine: Engine, dollars: float, at: datetime) -> None:
    with session_scope(engine) as db:
        session = Session(title="s", runtime="claude_code", created_at=at - H)
        db.add(session)
        db.flush()
        db.add(Turn(session_id=session.id, runtime="claude_code", status="done", cost_usd=dollars, created_at=at - H,
                    started_at=at - timedelta(minutes=1), finished_at=at, duration_ms=60_000))


def test_the_book_keeps_the_latest_reading_of_each_account_and_window(any_engine: Engine) -> None:
    book = ReadingBook(any_engine)
    book.record(said(utilization=0.5, resets_at=NOW + H, at=NOW))
    book.record(said(utilization=0.7, resets_at=NOW + H, at=NOW + timedelta(seconds=5)))
    book.record(said(utilization=0.1, resets_at=NOW + H, at=NOW - H))  # late, older: ignored
    book.record(said(utilization=0.2, resets_at=NOW + H, account="b"))
    book.record(said("seven_day_opus", status="rejected", resets_at=NOW + 24 * H))
    kept = {(r.account, r.kind): r for r in book.latest()}
    assert set(kept) == {("a", "five_hour"), ("b", "five_hour"), ("a", "seven_day_opus")}
    assert kept["a", "five_hour"].utilization == 0.7 and kept["a", "five_hour"].observed_at == NOW + timedelta(
        seconds=5
    )
    assert kept["a", "seven_day_opus"].status == "rejected"


def test_before_the_first_reading_the_ledger_stands_in_and_says_so(engine: Engine) -> None:
    reading = AgentsSource(engine, ledger(engine)).read(NOW)
    assert [(w.name, w.capacity_usd, w.measured_by, w.fallback) for w in reading.windows] == [
        ("5h", 50.0, None, "no_reading"), ("7d", 600.0, None, "no_reading")]


def test_a_reading_is_the_window_and_calibration_prices_it_from_pacers_spend(any_engine: Engine) -> None:
    source = AgentsSource(any_engine, ledger(any_engine))
    source.book.record(said(utilization=0.8, resets_at=NOW + H, status="allowed"))
    five, week = source.read(NOW).windows
    assert (five.utilization, five.resets_at, five.measured_by, five.fallback) == (0.8, NOW + H, "anthropic", None)
    assert five.capacity_usd is None  # nothing spent in the window yet: fraction mode, never $0.00
    assert week.fallback == "no_reading" and week.capacity_usd == 600.0
    spend(any_engine, 12.0, NOW - H)  # inside the window the provider says began at NOW + H - 5h
    spend(any_engine, 99.0, NOW - 5 * H)  # before it: not this window's
    five = source.read(NOW).windows[0]
    assert five.capacity_usd == pytest.approx(12.0 / 0.8) and five.spent_usd == pytest.approx(12.0)


def test_the_providers_warning_is_carried_on_its_window(engine: Engine) -> None:
    source = AgentsSource(engine, ledger(engine))
    source.book.record(said(utilization=0.5, resets_at=NOW + H, status="allowed"))
    assert [w.warned for w in source.read(NOW).windows] == [False, False]
    source.book.record(said(utilization=0.9, resets_at=NOW + H, status="allowed_warning", at=NOW + H / 60))
    assert [w.warned for w in source.read(NOW + H / 60).windows] == [True, False]


def test_a_reading_from_before_the_reset_falls_back(engine: Engine) -> None:
    source = AgentsSource(engine, ledger(engine))
    source.book.record(said(utilization=0.95, resets_at=NOW + H))
    assert source.read(NOW + 2 * H).windows[0].fallback == "rolled_over"


@pytest.mark.parametrize(
    ("env", "chosen"),
    [
        ({}, "LedgerSource"),  # the echo agent prints nothing
        ({"PACER_RUNNER": "command"}, "AgentsSource"),  # Claude Code by default
        ({"PACER_RUNNER": "command", "PACER_RUNTIME_NAME": "codex"}, "AgentsSource"),
        ({"PACER_RUNNER": "command", "PACER_RUNTIME_NAME": "aider"}, "LedgerSource"),
        ({"PACER_RUNNER": "command", "PACER_QUOTA_SOURCE": "ledger"}, "LedgerSource"),
        ({"PACER_QUOTA_SOURCE": "agents"}, "AgentsSource"),
    ],
)
def test_agents_is_the_default_for_claude_code_and_codex(engine: Engine, env: dict[str, str], chosen: str) -> None:
    assert type(build_quota_source(load(env), engine)).__name__ == chosen


# --------------------------------------------------------------------------- end to end


def fake_claude(tmp_path: Path, book: ReadingBook) -> CommandRunner:
    return CommandRunner(
        f"{shlex.quote(sys.executable)} {FAKE} -p {{prompt}} --output-format stream-json", "", "claude_code", 30,
        tmp_path / "work", env={"PATH": "/usr/bin:/bin"}, provider_sink=book.record, account="acct-1",
        clock=VirtualClock(NOW),
    )


def test_the_stand_in_claudes_reading_reaches_the_source(engine: Engine, tmp_path: Path) -> None:
    source = AgentsSource(engine, ledger(engine))
    resets = NOW + 3 * H
    fake_claude(tmp_path, source.book).run(
        TurnRequest(1, 1, f"[fake:stream][fake:rate=allowed:0.8:{int(resets.timestamp())}:five_hour]"))
    five = source.read(NOW).windows[0]
    assert (five.utilization, five.resets_at, five.measured_by) == (0.8, resets, "anthropic")


def test_a_rejected_reading_holds_spot_work_until_the_providers_reset_and_priority_runs(
    engine: Engine, tmp_path: Path
) -> None:
    clock = VirtualClock(NOW)
    ctx, deferrer, workers, _ = build(engine, clock, max_sessions=4, turn_minutes=5)
    source = AgentsSource(engine, ledger(engine))
    ctx.ports.quota = source
    resets = NOW + 2 * H
    fake_claude(tmp_path, source.book).run(
        TurnRequest(1, 1, f"[fake:stream][fake:rate=rejected:-:{int(resets.timestamp())}:five_hour]"))

    spot = submit_turn(ctx, new(ctx, prompt="sweep"), "sweep")
    assert (spot.outcome, spot.reason) == ("held", "at_utilization_limit")
    assert "as Anthropic (Claude Code) reports it" in (spot.sentence or "")
    assert "rolls over at" in (spot.sentence or "")
    priority = submit_turn(ctx, new(ctx, genesis="command", prompt="now"), "now")
    assert priority.outcome == "started"

    deferrer.run_until(resets - timedelta(minutes=1))
    assert row(ctx, spot.session_id).status == "waiting"  # re-checked on its ladder, held every time
    deferrer.run_until(resets + 2 * H)
    with session_scope(engine) as db:
        turns = [t for t in db.exec(select(Turn).where(Turn.session_id == spot.session_id)) if t.started_at is not None]
    assert turns and min(t.started_at for t in turns) >= resets


@pytest.mark.parametrize(
    ("model", "buckets"),
    [(None, []), ("claude-opus-4-1", ["7d_opus"]), ("sonnet", ["7d_sonnet"]), ("claude-haiku-4", [])],
)
def test_the_runners_model_picks_its_weekly_bucket(engine: Engine, model: str | None, buckets: list[str]) -> None:
    source = AgentsSource(engine, ledger(engine), model=model)
    for kind in ("seven_day_opus", "seven_day_sonnet"):
        source.book.record(said(kind, utilization=0.5, resets_at=NOW + 24 * H))
    assert [w.name for w in source.read(NOW).windows] == ["5h", "7d", *buckets]


@pytest.mark.parametrize(("model", "outcome"), [("claude-opus-4-1", "held"), ("claude-sonnet-4-5", "started")])
def test_a_spent_per_model_week_holds_that_models_spot_work_only(engine: Engine, model: str, outcome: str) -> None:
    clock = VirtualClock(NOW)
    ctx, _, _, _ = build(engine, clock, max_sessions=4, turn_minutes=5)
    source = AgentsSource(engine, ledger(engine), model=model)
    source.book.record(said("seven_day_opus", status="rejected", utilization=1.0, resets_at=NOW + 30 * H))
    ctx.ports.quota = source
    spot = submit_turn(ctx, new(ctx, prompt="sweep"), "sweep")
    assert spot.outcome == outcome
    if outcome == "held":
        assert "weekly Opus" in (spot.sentence or "") and "as Anthropic (Claude Code) reports it" in (
            spot.sentence or ""
        )


def test_build_quota_source_reads_the_model_from_the_runner_command(engine: Engine) -> None:
    source = build_quota_source(
        load({"PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": "claude -p --model opus --output-format stream-json"}),
        engine,
    )
    assert isinstance(source, AgentsSource) and source.buckets == [("7d_opus", "seven_day_opus")]



def test_the_gate_card_says_which_window_is_measured_and_why_the_other_is_not(engine: Engine) -> None:
    from scheduler.engine.fleet import read_quota
    from scheduler.steering.gate_card import build_card, render_card

    ctx, _, _, _ = build(engine, VirtualClock(NOW))
    source = AgentsSource(engine, ledger(engine))
    source.book.record(said(utilization=0.8, resets_at=NOW + 3 * H, status="allowed"))
    ctx.ports.quota = source
    reading = read_quota(ctx, NOW)  # before the transaction, as every surface reads it
    with session_scope(engine) as db:
        card = build_card(db, ctx, reading, NOW)
    windows = {w["name"]: w for w in card.as_dict()["windows"]}  # type: ignore[union-attr]
    assert (windows["5h"]["spent"], windows["5h"]["measured_by"], windows["5h"]["fallback"]) == (0.8, "anthropic", None)
    assert (windows["7d"]["measured_by"], windows["7d"]["fallback"]) == (None, "no_reading")
    text = render_card(card)
    assert (
        "as Anthropic (Claude Code) reports it" in text
        and "the ledger's estimate: no agent has reported this window yet" in text
    )
