"""A burst's first turns decided together (`scheduler.engine.turns.submit_turns`) are the decisions one
at a time would make, in one transaction; an archived session in the batch is refused and the
rest go on; a failure inside the batch costs the others nothing. And the GitHub follow-up
thread finishes a burst's plans that way (`bot.github.plan.finish_github_plans`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from sqlmodel import func, select

from bot.github.plan import GithubPlan, finish_github, finish_github_plans
from bot.triggers import writes as store
from bot.triggers.spec import check_spec
from scheduler.context import Context
from scheduler.engine import turns
from scheduler.engine.lifecycle import archive, recover
from scheduler.engine.turns import submit_turn, submit_turns
from scheduler.holds.groups import repository_group
from scheduler.holds.operator import REASON as OPERATOR_HOLD
from scheduler.holds.operator import NewOperatorHold, add_hold, place_hold
from scheduler.store.db import session_scope
from scheduler.store.models import EnqueuedMessage, Status, Turn
from scheduler.testing import VirtualClock
from tests.conftest import _fresh_sqlite
from tests.support.harness import T0, build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

API = repository_group("acme/api")


def _burst(engine: Engine) -> tuple[Context, list[tuple[int, str]]]:
    """Four slots, one taken by a session working on acme/api; then thirteen new sessions: priority
    and spot, two more for acme/api, one held by an operator, one archived before its turn."""
    ctx, *_rest = build(engine, VirtualClock(T0), max_sessions=4, turn_minutes=600, wired=True)
    occupant = new(ctx, genesis="schedule", concurrency_group=API)
    assert submit_turn(ctx, occupant, "occupy").outcome == "started"
    kinds = [
        "spot",
        "priority",
        "spot",
        "spot",
        "priority",
        "spot",
        "spot",
        "priority",
        "spot",
        "spot",
        "spot",
        "priority",
        "spot",
    ]
    ids = [
        new(ctx, genesis="api", scheduling_class=kind, concurrency_group=API if i in (2, 9) else None)
        for i, kind in enumerate(kinds)
    ]
    place_hold(ctx, "session", [str(ids[5])], armer="U_OPS", reason="looking at it")
    archive(ctx, ids[7], actor="U_OPS")
    return ctx, [(sid, f"first turn of {sid}") for sid in ids]


def _decisions(results: list) -> list[tuple[str, str | None]]:
    return [(r.outcome, r.reason) for r in results]


def test_a_batch_decides_what_one_at_a_time_decides(any_engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "alone").mkdir()
    alone_engine = _fresh_sqlite(tmp_path / "alone")  # the same burst on a database of its own
    alone_ctx, alone_turns = _burst(alone_engine)
    one_by_one = []
    for sid, prompt in alone_turns:
        try:
            one_by_one.append(submit_turn(alone_ctx, sid, prompt, kind="first"))
        except turns.Refused as exc:
            one_by_one.append(turns.Submission("refused", sid, reason="archived", sentence=str(exc)))

    ctx, batch = _burst(any_engine)
    together = submit_turns(ctx, batch, kind="first")

    assert _decisions(together) == _decisions(one_by_one)
    outcomes = {outcome for outcome, _reason in _decisions(together)}
    assert {"started", "held", "refused"} <= outcomes  # the burst exercised each kind of answer
    for (sid, _prompt), alone in zip(batch, one_by_one, strict=True):
        mine, theirs = row(ctx, sid), row(alone_ctx, alone.session_id)
        assert (mine.status, mine.hold_reason) == (theirs.status, theirs.hold_reason), f"session #{sid}"


def test_an_archived_session_in_a_batch_is_refused_and_the_rest_go_on(any_engine: Engine) -> None:
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=4, wired=True)
    ids = [new(ctx, genesis="api", scheduling_class="priority") for _ in range(3)]
    archive(ctx, ids[1], actor="U_OPS")

    results = submit_turns(ctx, [(sid, "go") for sid in ids])

    assert [r.outcome for r in results] == ["started", "refused", "started"]
    assert results[1].reason == "archived" and f"#{ids[1]}" in results[1].sentence
    assert row(ctx, ids[1]).status == Status.ARCHIVED.value


def test_a_failure_in_a_batch_rolls_it_back_and_each_turn_is_submitted_alone(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=4, wired=True)
    ids = [new(ctx, genesis="api", scheduling_class="priority") for _ in range(3)]
    real = turns._submit
    calls: list[int] = []

    def breaks_once_on_the_second(work, session_id, *args):  # type: ignore[no-untyped-def]
        calls.append(session_id)
        if session_id == ids[1] and calls.count(session_id) == 1:
            raise RuntimeError("the database went away")
        return real(work, session_id, *args)

    monkeypatch.setattr(turns, "_submit", breaks_once_on_the_second)
    results = submit_turns(ctx, [(sid, "go") for sid in ids])

    assert [r.outcome for r in results] == ["started", "started", "started"]
    assert calls == [ids[0], ids[1], ids[0], ids[1], ids[2]]  # the batch, then each alone
    assert all(row(ctx, sid).status == Status.RUNNING.value for sid in ids)  # each started once


def test_an_unknown_kind_is_refused_before_anything_is_written(any_engine: Engine) -> None:
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=4, wired=True)
    sid = new(ctx, genesis="api")
    with pytest.raises(turns.InvalidInput, match="kind"):
        submit_turns(ctx, [(sid, "go")], kind="sideways")
    assert row(ctx, sid).status == Status.WAITING.value and not row(ctx, sid).hold_reason


def _plans(engine: Engine, *, held: bool = True) -> tuple[Context, list[int], list[GithubPlan]]:
    """Five issues opened at once, the first under `pacer:hold` unless not `held`, for two slots."""
    ctx, *_rest = build(engine, VirtualClock(T0), max_sessions=2, wired=True)
    ids = [new(ctx, genesis="github_issue", scheduling_class="spot") for _ in range(5)]
    plans = [
        GithubPlan(actor="github:octo", issue=f"acme/api#{n}", created=[(sid, f"fix #{n}")])
        for n, sid in enumerate(ids)
    ]
    if held:  # born under pacer:hold: its hold committed with its delivery, as `record_github` writes it
        with session_scope(engine) as db:
            hold = add_hold(db, NewOperatorHold("session", [str(ids[0])], "github:octo", "pacer:hold"), T0)
        plans[0].holds_placed.append((ids[0], hold.id or 0))
    return ctx, ids, plans


def _commits(engine: Engine, finish: Callable[[], None]) -> int:
    commits: list[int] = []

    def committed(_conn: object) -> None:
        commits.append(1)

    event.listen(engine, "commit", committed)
    try:
        finish()
    finally:
        event.remove(engine, "commit", committed)
    return len(commits)


def test_a_burst_of_plans_decides_its_first_turns_in_one_transaction_and_a_hold_still_holds(
    any_engine: Engine, tmp_path: Path
) -> None:
    (tmp_path / "alone").mkdir()
    alone_ctx, _alone_ids, alone_plans = _plans(_fresh_sqlite(tmp_path / "alone"))
    alone = _commits(alone_ctx.engine, lambda: [finish_github(alone_ctx, plan) for plan in alone_plans] and None)
    ctx, ids, plans = _plans(any_engine)

    together = _commits(any_engine, lambda: finish_github_plans(ctx, plans))

    assert (row(ctx, ids[0]).hold_reason, row(ctx, ids[0]).hold_prompt) == (
        OPERATOR_HOLD,
        "fix #0",
    )  # held at its first ask
    assert [row(ctx, sid).status for sid in ids[1:]].count(Status.RUNNING.value) == 2
    assert together == alone - (len(plans) - 1)  # five decisions, one commit; the hold and the notices as alone


def test_plans_that_steer_are_finished_alone_in_their_place(any_engine: Engine) -> None:
    ctx, ids, plans = _plans(any_engine)
    archived_between = GithubPlan(actor="github:octo", issue="acme/api#2", archive=[ids[2]])
    plans.insert(3, archived_between)  # an issue closed after it and before the next two opened

    finish_github_plans(ctx, plans)

    assert row(ctx, ids[2]).status == Status.ARCHIVED.value
    assert [row(ctx, sid).status for sid in (ids[1], ids[3])] == [Status.RUNNING.value] * 2  # #2's slot went on


def test_each_start_in_a_batch_fires_the_triggers_watching_it(any_engine: Engine) -> None:
    """Every session a batch starts arms its own session event for the triggers watching it."""
    ctx, deferrer, *_rest = build(any_engine, VirtualClock(T0), max_sessions=4, wired=True)
    config = {"filter": {"genesis": "api"}, "states": ["running"]}
    spec = check_spec(
        {"name": "on-start", "kind": "ao_event", "prompt_template": "{{ session.title }} began", "config": config}
    )
    with session_scope(any_engine) as db:
        store.create_trigger(db, spec, now=ctx.clock.now())
    ids = [new(ctx, genesis="api", scheduling_class="priority") for _ in range(3)]

    assert [r.outcome for r in submit_turns(ctx, [(sid, "go") for sid in ids])] == ["started"] * 3

    armed = sorted(int(job.split(":")[1]) for job in deferrer.pending() if job.startswith("session_event:"))
    assert armed == ids


def test_a_first_turn_asked_twice_runs_once(any_engine: Engine) -> None:
    """Recovery at an election finds a webhook's session with no turn yet while its plan still
    waits in the edge's queue: both ask for the first turn. The second ask changes nothing."""
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=1, wired=True)
    running, held = new(ctx, genesis="api", prompt="fix #1"), new(ctx, genesis="api", prompt="fix #2")
    assert recover(ctx)["first_turns"] == 2  # one starts, one is held behind it

    again = submit_turns(ctx, [(running, "fix #1"), (held, "fix #2")])
    alone = submit_turn(ctx, held, "fix #2")

    assert [(r.outcome, r.reason) for r in [*again, alone]] == [("refused", "first_turn_taken")] * 3
    assert "first turn asked already" in alone.sentence
    with session_scope(any_engine) as db:
        assert db.exec(select(func.count()).select_from(EnqueuedMessage)).one() == 0
        assert db.exec(select(func.count()).select_from(Turn)).one() == 1
    assert (row(ctx, running).status, row(ctx, held).hold_prompt) == (Status.RUNNING.value, "fix #2")


def test_a_plan_that_fails_costs_the_plans_after_it_nothing(any_engine: Engine) -> None:
    ctx, ids, plans = _plans(any_engine, held=False)
    broken = GithubPlan(
        actor="github:octo", issue="acme/api#not-a-number", issue_state="closed"
    )  # int() fails outside any step's guard
    plans.insert(1, broken)

    finish_github_plans(ctx, plans)

    assert [row(ctx, sid).status for sid in ids].count(
        Status.RUNNING.value
    ) == 2  # both slots, the broken plan in between
    assert all(row(ctx, sid).hold_reason is not None for sid in ids if row(ctx, sid).status != Status.RUNNING.value)
