"""The preemption cycling report on every surface: `/pacer holds` (text and Block Kit), the App
Home and `/metrics`. The ledger is written as the scheduler writes it
(`tests/test_cycling.py` drives real preemptions); here it is seeded, so each surface is read
against one known report."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot import chat
from bot.metrics_collector import DatabaseCollector
from bot.runtime import Pacer
from bot.settings import load
from bot.slack.home import home_view
from scheduler import wiring
from scheduler.db import session_scope
from scheduler.models import PreemptionEvent, Turn
from tests import harness

H = timedelta(hours=1)


@pytest.fixture
def pacer(engine, clock) -> Pacer:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2)
    wiring.install(ctx)
    return Pacer(settings=load({"PACER_ROSTER": "UOP=operator"}, toml_path=None), engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)


def seed_cycle(pacer: Pacer) -> tuple[int, int, int]:
    """Spot session `victim` preempted three times in the last day, twice by `taker` (once with a
    halted turn that had spent $1.25); `other` took the third."""
    ctx = pacer.ctx
    victim = harness.new(ctx, title="nightly refactor")
    taker = harness.new(ctx, title="hotfix", scheduling_class="priority")
    other = harness.new(ctx, title="incident")
    now = ctx.clock.now()
    with session_scope(pacer.engine) as db:
        turn = Turn(session_id=victim, status="halted", outcome="halted", cost_usd=1.25, created_at=now - 5 * H)
        db.add(turn)
        db.flush()
        db.add(PreemptionEvent(session_id=victim, by_id=taker, turn_id=turn.id, at=now - 5 * H, halted=True))
        db.add(PreemptionEvent(session_id=victim, by_id=taker, at=now - 3 * H))
        db.add(PreemptionEvent(session_id=victim, by_id=other, at=now - 1 * H))
        db.add(PreemptionEvent(session_id=other, by_id=taker, at=now - 30 * H))  # a day and more ago
    return victim, taker, other


def test_holds_names_the_cycling_session_the_pair_and_the_cost(pacer) -> None:
    victim, taker, other = seed_cycle(pacer)
    text = chat.answer(pacer, "UOP", "holds", surface="console").text
    assert "Preemption cycling (the last 24 h: 3 preemptions, $1.25 lost to halted turns)" in text
    assert f"#{victim} nightly refactor · preempted 3 times (1 halted) by #{taker}, #{other} · $1.25 lost" in text
    assert f"#{victim} nightly refactor and #{taker} hotfix · #{taker} took #{victim}'s slot 2 times · $1.25 lost" in text
    assert "No holds in force" in text  # not a hold: said beside them


def test_holds_says_nothing_of_cycling_when_nothing_cycles(pacer) -> None:
    text = chat.answer(pacer, "UOP", "holds", surface="console").text
    assert "cycling" not in text


def test_holds_in_slack_puts_the_report_under_the_heading(pacer) -> None:
    victim, taker, _other = seed_cycle(pacer)
    answer = chat.answer(pacer, "UOP", "holds", surface="slack")
    sections = [b["text"]["text"] for b in answer.blocks if b["type"] == "section"]
    assert sections[0].startswith("*Preemption cycling*")
    assert f"*#{victim}* nightly refactor · preempted 3 times" in sections[0] and f"*#{taker}* hotfix" in sections[0]


def test_the_app_home_shows_it_under_the_gate_card(pacer) -> None:
    victim, _taker, _other = seed_cycle(pacer)
    texts = [b["text"]["text"] for b in home_view(pacer, "UOP")["blocks"] if b["type"] == "section"]
    [report] = [t for t in texts if t.startswith("*Preemption cycling*")]
    assert f"*#{victim}* nightly refactor · preempted 3 times (1 halted)" in report and "$1.25 lost" in report


def test_metrics_count_the_cycling_sessions_pairs_and_cost(pacer) -> None:
    seed_cycle(pacer)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in DatabaseCollector(pacer.engine, pacer.ctx).collect() for s in family.samples}
    assert samples[("pacer_preemption_cycling_sessions", ())] == 1
    assert samples[("pacer_preemption_cycling_pairs", ())] == 1
    assert samples[("pacer_preemption_lost_usd", (("of", "all"),))] == 1.25
    assert samples[("pacer_preemption_lost_usd", (("of", "cycling"),))] == 1.25
