"""A paused turn keeps its task. An agent that names its conversation only in its final result (a
command runner with `--output-format json`) and is halted mid-run leaves nothing to `--resume`:
the next turn carries the halted turn's own prompt and attachments, whatever halted it — the
budget ceiling, a preemption, a park with halt, a cost cap. A turn that named its conversation
still resumes it with the nudge (the request carries the agent session id, which the runner
turns into `--resume`). In virtual time, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.holds.cost_caps import set_cap
from scheduler.pauses.parking import pause_into_spot_queue
from scheduler.ports import TurnRequest
from scheduler.testing import VirtualClock
from tests.support.sweeping import Scene

TASK = "fix the flaky test in tests/test_io.py"
NUDGE = "pick up where you left off"


def _ceiling(scene: Scene, sid: int) -> None:
    scene.quota.spent_5h = 900  # over the spot budget: the sweep pauses the running spot turn
    assert scene.sweep().paused == [sid]
    scene.quota.spent_5h = 0
    assert scene.sweep().resumed == [sid]


def _preemption(scene: Scene, sid: int) -> None:
    scene.start(cls="priority", minutes=30)  # into the full fleet: the spot turn is marked
    scene.advance(minutes=11)  # past its grace, still at the cap: halted
    assert scene.sweep().marks.halted == [sid]
    scene.advance(minutes=20)  # the priority turn ends: a slot is free, and the sweep resumes it
    assert sid in scene.running_ids()


def _park(scene: Scene, sid: int) -> None:
    assert pause_into_spot_queue(scene.ctx, sid, halt=True).halted
    assert start_now(scene.ctx, sid).submission.outcome == "started"


HALTS: dict[str, Callable[[Scene, int], None]] = {"ceiling": _ceiling, "preemption": _preemption, "park": _park}


def _scene(engine: Engine, clock: VirtualClock, *, named: bool) -> Scene:
    scene = Scene(engine, clock, max_sessions=1, turn_minutes=60)
    scene.workers.names_conversation_early = named
    return scene


def _started(scene: Scene, attachment: Path) -> tuple[int, list[dict[str, Any]]]:
    sid = scene.session(cls="spot")
    attachments = [{"name": attachment.name, "path": str(attachment)}]
    assert submit_turn(scene.ctx, sid, TASK, attachments).outcome == "started"
    scene.advance(minutes=5)
    return sid, attachments


def _requests(scene: Scene, sid: int) -> list[TurnRequest]:
    return [r for r in scene.workers.submitted if r.session_id == sid]


@pytest.fixture
def attachment(tmp_path: Path) -> Path:
    path = tmp_path / "trace.log"
    path.write_text("the failing run\n")
    return path


@pytest.mark.parametrize("halt", sorted(HALTS))
def test_a_turn_halted_before_the_agent_named_a_conversation_runs_its_task_again(
    any_engine: Engine, clock: VirtualClock, attachment: Path, halt: str
) -> None:
    scene = _scene(any_engine, clock, named=False)
    sid, attachments = _started(scene, attachment)
    HALTS[halt](scene, sid)
    first, again = _requests(scene, sid)
    assert scene.turns(sid)[0].status == "halted" and scene.row(sid).agent_session_id is None
    assert (again.prompt, list(again.attachments), again.agent_session_id) == (TASK, attachments, None)
    assert scene.turns(sid)[-1].kind == "first"  # the task again, not a resume of nothing


@pytest.mark.parametrize("halt", sorted(HALTS))
def test_a_turn_that_named_its_conversation_resumes_it_with_the_nudge(
    any_engine: Engine, clock: VirtualClock, attachment: Path, halt: str
) -> None:
    scene = _scene(any_engine, clock, named=True)
    sid, _attachments = _started(scene, attachment)
    HALTS[halt](scene, sid)
    _first, resumed = _requests(scene, sid)
    assert (resumed.agent_session_id, list(resumed.attachments)) == (f"sim-{sid}", [])
    assert NUDGE in resumed.prompt or "continue where you left off" in resumed.prompt
    assert scene.turns(sid)[-1].kind == "resume"


def test_a_park_with_its_own_prompt_runs_the_task_first_and_the_prompt_after(
    any_engine: Engine, clock: VirtualClock, attachment: Path
) -> None:
    scene = _scene(any_engine, clock, named=False)
    sid, attachments = _started(scene, attachment)
    assert pause_into_spot_queue(scene.ctx, sid, resume_prompt="then update the changelog", halt=True).halted
    assert start_now(scene.ctx, sid).submission.outcome == "started"
    scene.advance(minutes=61)  # the task runs to its end; the park's prompt comes next
    prompts = [(r.prompt, len(r.attachments)) for r in _requests(scene, sid)]
    assert prompts == [(TASK, 1), (TASK, 1), ("then update the changelog", 0)]


def test_a_cost_capped_turn_halted_before_its_conversation_was_named_runs_its_task_again(
    any_engine: Engine, clock: VirtualClock, attachment: Path
) -> None:
    scene = _scene(any_engine, clock, named=False)
    sid = scene.session(cls="spot", cost_cap_usd=1.0)  # $0.10 a minute: reached at ten minutes
    attachments = [{"name": attachment.name, "path": str(attachment)}]
    assert submit_turn(scene.ctx, sid, TASK, attachments).outcome == "started"
    scene.advance(minutes=10)
    assert (scene.row(sid).hold_reason, scene.turns(sid)[-1].status) == ("cost_cap", "halted")
    scene.advance(hours=2)  # its re-checks find it capped still, and hold it again as it was
    assert (scene.row(sid).hold_reason, scene.row(sid).hold_turn_kind) == ("cost_cap", "resume")
    set_cap(scene.ctx, sid, 10.0, actor="U_OPS")
    scene.advance(minutes=0)  # the queue pass the raise asked for
    _first, again = _requests(scene, sid)
    assert (again.prompt, list(again.attachments), again.agent_session_id) == (TASK, attachments, None)


def test_a_cost_capped_turn_that_named_its_conversation_continues_it(
    any_engine: Engine, clock: VirtualClock, attachment: Path
) -> None:
    scene = _scene(any_engine, clock, named=True)
    sid = scene.session(cls="spot", cost_cap_usd=1.0)
    assert submit_turn(scene.ctx, sid, TASK).outcome == "started"
    scene.advance(minutes=10)
    set_cap(scene.ctx, sid, 10.0, actor="U_OPS")
    scene.advance(minutes=0)
    _first, resumed = _requests(scene, sid)
    assert (resumed.prompt, resumed.agent_session_id) == ("Continue where you left off.", f"sim-{sid}")
