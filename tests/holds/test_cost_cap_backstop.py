"""The cost cap as a backstop inside the agent (P18 item 5): a capped session's turn carries what
the cap has left, Claude Code is given it as `--max-budget-usd`, and an agent that stops itself
there (`error_max_budget_usd`) leaves its session held on the cap, as Pacer's own halt does;
raising the cap resumes it. Through the real command runner with a stand-in `claude`."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from integrations.runners.command import CommandRunner
from integrations.runners.invocation import budget_option, build_argv
from scheduler.engine.completion import complete_turn
from scheduler.engine.turns import submit_turn
from scheduler.holds.cost_caps import set_cap
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Claude Code, as far as the budget goes: it records its argv, and given --max-budget-usd it spends
# the budget and reports that it stopped there.
STAND_IN = """#!{python}
import json, sys
argv = sys.argv[1:]
open("argv.json", "w").write(json.dumps(argv))
sys.stdin.read()
if "--max-budget-usd" in argv:
    budget = float(argv[argv.index("--max-budget-usd") + 1])
    print(json.dumps({{"type": "result", "subtype": "error_max_budget_usd", "is_error": True,
                      "total_cost_usd": budget, "session_id": "s-1", "result": ""}}))
    sys.exit(1)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.5,
                  "session_id": "s-1", "result": "done"}}))
"""


def _claude(tmp_path: Path) -> Path:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(STAND_IN.format(python=sys.executable))
    program.chmod(0o755)
    return program


def _request(budget: float | None) -> TurnRequest:
    return TurnRequest(session_id=7, turn_id=70, prompt="fix the build", runtime="claude_code", max_budget_usd=budget)


def test_claude_is_given_the_cap_left_and_other_agents_or_an_uncapped_turn_are_not(tmp_path: Path) -> None:
    claude = ["/usr/local/bin/claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert budget_option(claude) == "--max-budget-usd"
    assert build_argv(claude, [], _request(0.6), tmp_path, budget="--max-budget-usd").argv[-2:] == [
        "--max-budget-usd", "0.60"]
    assert build_argv(claude, [], _request(0.001), tmp_path, budget="--max-budget-usd").argv[-1] == "0.01"
    assert "--max-budget-usd" not in build_argv(claude, [], _request(None), tmp_path, budget="--max-budget-usd").argv
    assert budget_option(["codex", "exec", "--json"]) is None
    assert budget_option([*claude, "--max-budget-usd", "5"]) is None  # the template's own budget stands


def test_a_claude_that_stops_at_its_budget_is_a_halt_at_the_cap(tmp_path: Path) -> None:
    runner = CommandRunner(str(_claude(tmp_path)), "--resume {agent_session_id}", "claude_code", 60, tmp_path / "work",
                           env={"PATH": "/usr/bin:/bin"})
    result = runner.run(_request(0.6))
    argv = json.loads((tmp_path / "work" / "session-7" / "argv.json").read_text())
    assert argv[-2:] == ["--max-budget-usd", "0.60"]
    assert (result.outcome, result.extra.get("budget_reached"), result.cost_usd) == (Outcome.HALTED, True, 0.6)
    assert result.error == "The agent stopped itself at the session's cost cap ($0.60 left when the turn began)."

    uncapped = runner.run(_request(None))
    assert uncapped.outcome is Outcome.SUCCESS and "budget_reached" not in uncapped.extra


def test_a_capped_turn_carries_the_cap_left_and_its_agents_stop_holds_the_session_on_the_cap(
    any_engine, clock
) -> None:
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=3, turn_minutes=20, burn=0.1, wired=True)
    heard = Heard(ctx)
    sid = new(ctx, title="capped", cost_cap_usd=3.0)
    assert submit_turn(ctx, sid, "go").outcome == "started"
    deferrer.advance(timedelta(minutes=20))  # $2.00 recorded
    assert [r.max_budget_usd for r in workers.submitted] == [pytest.approx(3.0)]
    uncapped = new(ctx, title="free")
    assert submit_turn(ctx, uncapped, "go").outcome == "started"
    assert workers.submitted[-1].max_budget_usd is None

    assert submit_turn(ctx, sid, "more", kind="follow_up").outcome == "started"
    assert workers.submitted[-1].max_budget_usd == pytest.approx(1.0)  # $3.00 less the $2.00 spent
    with session_scope(any_engine) as db:
        running = db.exec(Turn.__table__.select().where(Turn.session_id == sid, Turn.status == "running")).one()
    complete_turn(ctx, running.id, TurnResult(Outcome.HALTED, cost_usd=1.0, extra={"budget_reached": True}))
    session = row(ctx, sid)
    assert (session.status, session.hold_reason) == ("waiting", "cost_cap")
    assert session.hold_sentence.startswith(
        f"Halted: session #{sid}'s agent stopped itself at the budget it was given, its $3.00 cost cap ($3.00 spent)."
    )
    assert [n["reason"] for n in heard.of("paused")] == ["cost_cap"]

    set_cap(ctx, sid, 5.0, actor="U_OPS")
    deferrer.advance(timedelta(0))  # the queue pass the raise asked for
    assert row(ctx, sid).status == "running"
    assert workers.submitted[-1].max_budget_usd == pytest.approx(2.0)
