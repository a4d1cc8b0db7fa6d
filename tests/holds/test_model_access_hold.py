"""Seed 002, "The holds", row "Model access": the provider's refusal says the plan does not
include the chosen model. The whole queue holds, naming the model; Resume is offered; the turn
goes back to the queue with no retry spent."""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrations.runners.command import CommandRunner
from integrations.runners.outcomes import model_option, refused_model
from scheduler.engine.turns import submit_turn
from scheduler.holds.queue import resume_queue
from scheduler.ports import Outcome, TurnRequest
from scheduler.testing import VirtualClock
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, finish, holds, holds_text
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FAKE = FIXTURES / "fake_claude.py"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("error", "model"),
    [
        ("Claude Opus 4 is not available with the Claude Pro plan.", "Claude Opus 4"),
        ("API Error: 403 Your plan does not include access to claude-opus-4-1.", "claude-opus-4-1"),
        ("Your subscription doesn't include Opus.", "Opus"),
        ("Your plan does not include Claude Opus 4.1.", "Claude Opus 4.1"),
        ("Your plan does not include access to this model", None),
        ("Please upgrade your plan to use this model", None),
    ],
)
def test_the_refusal_names_the_model_as_the_provider_wrote_it(error: str, model: str | None) -> None:
    assert refused_model(error) == model


@pytest.mark.parametrize(
    ("words", "model"),
    [
        (["claude", "-p", "{prompt}", "--model", "opus"], "opus"),
        (["claude", "--model=sonnet", "-p", "{prompt}"], "sonnet"),
        (["claude", "-p", "{prompt}"], None),
        (["claude", "--model"], None),
    ],
)
def test_the_command_names_the_model_it_chooses(words: list[str], model: str | None) -> None:
    assert model_option(words) == model


@pytest.mark.parametrize(
    ("said", "model"),
    [
        ("Claude Opus 4 is not available with the Claude Pro plan", "Claude Opus 4"),
        ("Please upgrade your plan to use this model", "opus"),  # the refusal names none: the command's
    ],
)
def test_the_command_runner_reports_model_access_with_the_model(tmp_path: Path, said: str, model: str) -> None:
    template = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} -p {{prompt}} --output-format json --model opus"
    runner = CommandRunner(template, "", "claude_code", 30, tmp_path / "work", env={"PATH": "/usr/bin:/bin"},
                           clock=VirtualClock(T0))
    result = runner.run(TurnRequest(session_id=3, turn_id=1, prompt=f"[fake:error={said}]", runtime="claude_code"))
    assert result.outcome is Outcome.MODEL_ACCESS, result.error
    assert result.extra["model"] == model


def test_seed_002_model_access_holds_the_queue_naming_the_model_and_resume_runs_it(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    a, b = new(ctx, title="Refactor auth", runtime="claude"), new(ctx, title="Docs")
    submit_turn(ctx, a, "refactor the auth module")
    finish(
        ctx,
        workers,
        deferrer,
        a,
        Outcome.MODEL_ACCESS,
        error="Claude Opus 4 is not available with the Claude Pro plan",
        extra={"model": "Claude Opus 4"},
    )

    view = holds(ctx).queue_holds
    assert len(view) == 1
    hold = view[0]
    sentence = (
        "The claude plan does not include the model Claude Opus 4, so every run would be refused the same way. "
        f"Pick a model your plan includes, then resume; #{a} “Refactor auth” is back in the queue and runs then. "
        "The hold also lifts by itself as soon as a claude turn still running succeeds."
    )
    assert (hold.label, hold.group, hold.sentence, hold.resumes_at, hold.resume_offered) == (
        "no access to the chosen model", None, sentence, None, True)
    text = holds_text(ctx)
    assert "  no access to the chosen model (whole queue) · 1 waiting · since 2026-11-02 09:00 UTC\n" in text
    assert f"      {sentence}\n      Resume: resume" in text
    assert [n["hold"].reason for n in heard.of("queue_hold")] == ["model_access"]

    s = row(ctx, a)  # back in the queue, no retry spent
    assert s.status == "waiting" and s.hold_reason == "queue_hold" and s.consecutive_failures == 0
    assert s.hold_prompt == "refactor the auth module"
    assert s.hold_sentence == f"The queue is paused (no access to the chosen model): {sentence}"
    sub = submit_turn(ctx, b, "write docs")
    assert (sub.outcome, sub.reason) == ("held", "queue_hold")
    deferrer.advance(timedelta(hours=2))  # no time shown: only a person (or a success) lifts it
    assert row(ctx, a).status == "waiting" and len(holds(ctx).queue_holds) == 1

    result = resume_queue(ctx, actor="U_OPS")
    assert result.sentence.startswith(
        "The queue is resumed (no access to the chosen model, held since 2026-11-02 09:00 UTC) by U_OPS"
    )
    deferrer.advance(timedelta(0))
    assert row(ctx, a).status == "running" and row(ctx, b).status == "running"


def test_a_model_access_refusal_naming_no_model_says_the_chosen_model(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, wired=True)
    a = new(ctx, title="x", runtime="codex")
    submit_turn(ctx, a, "x")
    finish(ctx, workers, deferrer, a, Outcome.MODEL_ACCESS, error="upgrade your plan to use this model")
    assert (
        holds(ctx).queue_holds[0].sentence.startswith("The codex plan does not include the chosen model, so every run")
    )


def test_a_turn_of_that_runtime_that_succeeds_lifts_the_model_access_hold(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    a, b = new(ctx, runtime="claude"), new(ctx, runtime="claude")
    submit_turn(ctx, a, "a")
    submit_turn(ctx, b, "b")
    finish(ctx, workers, deferrer, a, Outcome.MODEL_ACCESS, extra={"model": "opus"})
    assert len(holds(ctx).queue_holds) == 1
    finish(ctx, workers, deferrer, b, Outcome.SUCCESS)  # started before the hold, on the same runtime
    assert holds(ctx).queue_holds == []
    assert row(ctx, a).status == "running"
    assert [n["by"] for n in heard.of("queue_hold_lifted")] == ["a claude turn that succeeded"]
