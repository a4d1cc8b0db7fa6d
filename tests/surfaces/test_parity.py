"""Parity (DESIGN, "Surfaces": anything one can do, the others can): each action taken through
the REST API, a signed Slack `/pacer`, a signed Block Kit button and the console leaves the same
rows, emits the same events, asks for the same alarms (a queue pass, a trigger's release) and
writes the same audit lines.

Each cell of the table runs in its own world built the same way: a real SQLite file, Pacer's
whole HTTP app (REST and the Slack edge) under uvicorn on loopback, a loopback mock of Slack's
Web API, the real scheduler in virtual time. The world holds one running session, one held at
the concurrency limit, one parked on purpose (`pause_into_spot_queue`), one never run, and one
held on a prerequisite — that never-run session. After the action, the alarms it armed are
noted and then run; the rows, events, alarms and audit lines are compared with the REST cell's.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import SQLModel, select

from bot.cli import console
from bot.runtime.notify import CompositeNotifier, LogNotifier
from bot.runtime.process import Pacer
from bot.serve.app import create_app
from bot.slack.blocks import HOLD_RELEASE, QUEUE_ROW
from integrations.slack.notifier import QUEUE_RESUME
from scheduler.context import Context, Runtime
from scheduler.engine.turns import submit_turn
from scheduler.holds.operator import place_hold
from scheduler.pauses.parking import pause_into_spot_queue
from scheduler.store import db as dbmod
from scheduler.store.db import session_scope
from scheduler.store.models import (
    EnqueuedMessage,
    HumanMessage,
    OperatorHold,
    Policy,
    PolicyAudit,
    Prerequisite,
    QueueHold,
    Session,
    Trigger,
    Turn,
)
from scheduler.store.policy import change_policy, ensure_policy
from scheduler.store.prerequisite_rows import record_prerequisites
from scheduler.store.sessions import NewSession, create_session
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers
from tests.support.harness import T0, SetQuota, context
from tests.support.slack_mock import TEAM_ID, MockSlack, PacerServer, SlackClient, pacer_settings

TOKEN = "parity-token-0123456789"
ACTOR = "UOPS"
ACTOR_TOKEN = "uops-own-token-0123456789"  # the REST door speaks as ACTOR through their own token
SURFACES = ("rest", "slack", "block_kit", "console")
TABLES = (
    Session,
    Turn,
    Trigger,
    Policy,
    PolicyAudit,
    OperatorHold,
    QueueHold,
    Prerequisite,
    HumanMessage,
    EnqueuedMessage,
)
# Where a row names the door it came through: the one thing parity lets differ.
SURFACE_COLUMNS = {"surface", "source"}
# The loggers of the doors themselves (how a request arrived, how its answer left).
DOOR_LOGGERS = ("pacer.chat", "pacer.slack", "pacer.api", "pacer.app", "pacer.notify")
_names = itertools.count()


class RecordingDeferrer(VirtualDeferrer):
    """The virtual deferrer, noting the target of every alarm armed."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.armed: list[str] = []

    def schedule(self, job_id: str, at: Any, func: Callable[..., Any], *args: Any) -> None:
        self.armed.append(args[0] if args and isinstance(args[0], str) else job_id.split(":")[0])
        super().schedule(job_id, at, func, *args)


class AuditLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(DOOR_LOGGERS):
            # A policy line names its surface ("changed via slack:/pacer by UOPS"): parity is the rest.
            self.lines.append(re.sub(r"changed via .+? by ", "changed via <surface> by ", record.getMessage()))


@dataclass
class World:
    pacer: Pacer
    deferrer: RecordingDeferrer
    slack: SlackClient
    mock: MockSlack
    http: httpx.Client
    ids: dict[str, int]
    events: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    armed: tuple[str, ...]
    events: tuple[tuple[Any, ...], ...]
    audit: tuple[str, ...]
    rows: dict[str, list[dict[str, Any]]]


def _base(ctx: Context, quota: SetQuota) -> dict[str, int]:
    """The spot budget spent: a priority session running, a spot one held by the gate, a spot
    one parked on purpose (both from one trigger), a spot one never run, and a priority one
    waiting on that one."""
    now = ctx.clock.now()
    quota.spend_out()
    with session_scope(ctx.engine) as db:
        change_policy(db, {"max_sessions": 3}, surface="test", actor=None, now=now)
        trigger = Trigger(name="labels", kind="github_label", created_at=now, config={"label": "pacer"})
        db.add(trigger)
        db.flush()
        ids = {"tid": trigger.id or 0}
        for key, genesis, from_trigger in (
            ("run", "command", False),
            ("held", "github_label", True),
            ("parked", "github_label", True),
            ("never", "api", False),
            ("waiter", "command", False),
        ):
            row = create_session(db, NewSession(title=key, genesis=genesis, requester=ACTOR,
                                                trigger_id=ids["tid"] if from_trigger else None), now=now)
            row.prompt = f"{key} prompt"
            db.add(row)
            db.flush()
            ids[key] = row.id or 0
        record_prerequisites(db, db.get(Session, ids["waiter"]), f"depends on #{ids['never']}")
    for key in ("run", "held", "waiter"):
        submit_turn(ctx, ids[key], f"{key} prompt", kind="first")
    pause_into_spot_queue(ctx, ids["parked"])
    return ids


def _operator_hold(world: World) -> None:
    hold = place_hold(world.pacer.ctx, "genesis", ["github_label"], armer=ACTOR, reason="a deploy")
    world.ids["hold"] = hold.id or 0


def _queue_hold(world: World) -> None:
    with session_scope(world.pacer.engine) as db:
        db.add(QueueHold(reason="credits", sentence="The API key has no credit left.", since=world.pacer.clock.now()))


@contextmanager
def world(tmp: Path, mock: MockSlack) -> Iterator[World]:
    tmp.mkdir()
    engine = dbmod.make_engine(f"sqlite:///{tmp}/pacer.db")
    SQLModel.metadata.create_all(engine)
    with session_scope(engine) as db:
        ensure_policy(db)
    clock = VirtualClock(T0)
    deferrer = RecordingDeferrer(clock)
    quota = SetQuota(clock)
    ctx = context(
        engine,
        clock,
        deferrer,
        VirtualWorkers(clock, deferrer),
        wired=True,
        quota=quota,
        notifier=CompositeNotifier(LogNotifier()),
        runtimes={"echo": Runtime("echo", True, 0.1)},
        rng=random.Random(7),
    )  # one seed: the ladder's jitter is the same in every world
    settings = pacer_settings(mock, PACER_API_TOKEN=TOKEN, PACER_API_TOKENS=f"{ACTOR}={ACTOR_TOKEN}",
                              PACER_ROSTER=f"{ACTOR}=operator,UMEM=member")
    pacer = Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)
    app = create_app(pacer, start_scheduler=False)
    server = PacerServer(app).start()
    slack = SlackClient(server.url, app.state.slack, mock)
    slack.pacer = pacer
    http = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30,
                        headers={"Authorization": f"Bearer {ACTOR_TOKEN}", "X-Pacer-Actor": ACTOR})
    try:
        ids = _base(ctx, quota)
        here = World(pacer, deferrer, slack, mock, http, ids)
        ctx.plugins.listeners.append(lambda event, facts: here.events.append(_event(event, facts)))
        yield here
    finally:
        http.close()
        slack.close()
        server.stop()
        engine.dispose()


def _event(event: str, facts: Any) -> tuple[Any, ...]:
    return (
        event,
        *(f"{key}={facts[key]}" for key in ("session_id", "actor", "armer", "by", "hold_id", "reason") if key in facts),
    )


def _rows(world: World) -> dict[str, list[dict[str, Any]]]:
    with session_scope(world.pacer.engine) as db:
        return {
            model.__tablename__: [  # type: ignore[attr-defined]
                {k: _unsurfaced(v) for k, v in row.model_dump().items() if k not in SURFACE_COLUMNS}
                for row in db.exec(select(model).order_by(model.id)).all()  # type: ignore[attr-defined]
            ]
            for model in TABLES
        }


def _unsurfaced(value: Any) -> Any:
    return re.sub(r"changed via .+? by ", "changed via <surface> by ", value) if isinstance(value, str) else value


def _differences(got: dict[str, list[dict[str, Any]]], want: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each cell that differs, as table#row.column: got != want."""
    out = []
    for table, rows in want.items():
        if len(got[table]) != len(rows):
            out.append(f"{table}: {len(got[table])} rows != {len(rows)}")
            continue
        for mine, theirs in zip(got[table], rows, strict=True):
            out += [f"{table}#{theirs.get('id')}.{key}: {mine.get(key)!r} != {value!r}"
                    for key, value in theirs.items() if mine.get(key) != value]
    return out


# --------------------------------------------------------------------------- the doors


def _slack(world: World, text: str) -> str:
    name = f"parity{next(_names)}"
    assert world.slack.command(text, user=ACTOR, name=name).status_code == 200
    (answer,) = world.mock.wait_for_method(f"/response/{name}", timeout=10)
    world.slack.settle()
    return str(answer.body["text"])


def _click(world: World, action: dict[str, Any]) -> str:
    name = f"parity{next(_names)}"
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM_ID},
        "user": {"id": ACTOR, "team_id": TEAM_ID},
        "api_app_id": "A0PACER",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": "1790000000.000100", "channel_id": "C0WORK"},
        "channel": {"id": "C0WORK"},
        "response_url": world.mock.response_url(name),
        "actions": [action],
    }
    assert world.slack.action(payload).status_code == 200
    (answer,) = world.mock.wait_for_method(f"/response/{name}", timeout=10)
    world.slack.settle()
    return str(answer.body["text"])


def overflow(verb: str, key: str) -> Callable[[dict[str, int]], dict[str, Any]]:
    return lambda ids: {
        "type": "overflow",
        "action_id": QUEUE_ROW,
        "block_id": "row",
        "action_ts": "1.1",
        "selected_option": {"value": f"{verb}:{ids[key]}", "text": {"type": "plain_text", "text": verb}},
    }


def button(action_id: str, key: str | None) -> Callable[[dict[str, int]], dict[str, Any]]:
    return lambda ids: {"type": "button", "action_id": action_id, "block_id": "b", "action_ts": "1.1",
                        "value": str(ids[key]) if key else "resume", "text": {"type": "plain_text", "text": "x"}}


@dataclass(frozen=True)
class Action:
    name: str
    command: str  # the /pacer text, formatted with the world's ids
    rest: tuple[str, str, dict[str, Any] | None]  # method, path and body, formatted likewise
    expect: Callable[[Outcome, dict[str, int]], bool]  # what the action must have done, on every surface
    click: Callable[[dict[str, int]], dict[str, Any]] | None = None  # the Block Kit action, where one exists
    setup: Callable[[World], None] | None = None


def _status(outcome: Outcome, session_id: int) -> dict[str, Any]:
    return next(row for row in outcome.rows["sessions"] if row["id"] == session_id)


def _fill(value: Any, ids: dict[str, int]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return value


ACTIONS = [
    Action(
        "archive",
        "archive {never}",
        ("POST", "/sessions/{never}/archive", None),
        # the `archived` event feeds ao_event triggers and the status comment; the queue pass frees its waiter
        lambda o, ids: (
            ("archived", f"session_id={ids['never']}", f"actor={ACTOR}") in o.events
            and "queue_pass" in o.armed
            and _status(o, ids["waiter"])["status"] == "running"
        ),
        click=overflow("archive", "never"),
    ),
    # P19 item 2: stop halts the running turn where it stands and archives the session, saying who
    Action(
        "stop",
        "stop {run}",
        ("POST", "/sessions/{run}/stop", None),
        lambda o, ids: (
            ("archived", f"session_id={ids['run']}", f"actor={ACTOR}") in o.events
            and _status(o, ids["run"])["status"] == "archived"
            and [t["status"] for t in o.rows["turns"] if t["session_id"] == ids["run"]] == ["halted"]
            and "queue_pass" in o.armed  # its slot is free for the next
        ),
    ),
    Action(
        "policy set",
        "policy set gating=off override:api=priority",
        ("PATCH", "/policy", {"gating_enabled": False, "genesis_class_overrides": {"api": "priority"}}),
        lambda o, ids: "queue_pass" in o.armed and _status(o, ids["held"])["status"] == "running",
    ),
    Action(
        "trigger class",
        "trigger {tid} class priority",
        ("PATCH", "/triggers/{tid}", {"scheduling_class": "priority"}),
        # seed 001: a session parked on purpose is left alone by a trigger's promotion
        lambda o, ids: (
            _status(o, ids["parked"])["pause_reason"] is not None
            and _status(o, ids["parked"])["status"] == "waiting"
            and "trigger_release" in o.armed
        ),
    ),
    Action(
        "trigger precedence",
        "trigger {tid} precedence 70",
        ("PATCH", "/triggers/{tid}", {"precedence": 70}),
        lambda o, ids: (
            o.rows["triggers"][0]["precedence"] == 70
            and f"trigger #{ids['tid']} changed by {ACTOR}: precedence None -> 70" in o.audit
        ),
    ),
    Action(
        "promote",
        "promote {held}",
        ("PATCH", "/sessions/{held}", {"scheduling_class": "priority"}),
        lambda o, ids: _status(o, ids["held"])["scheduling_class"] == "priority",
        click=overflow("promote", "held"),
    ),
    Action(
        "demote top",
        "demote {held} top",
        ("PATCH", "/sessions/{held}", {"scheduling_class": "spot", "place": "top_of_spot"}),
        lambda o, ids: _status(o, ids["held"])["scheduling_class"] == "spot",
        click=overflow("demote_top", "held"),
    ),
    Action(
        "rank",
        "rank {held} 40",
        ("PATCH", "/sessions/{held}", {"precedence": 40}),
        lambda o, ids: _status(o, ids["held"])["precedence"] == 40,
    ),
    Action(
        "start",
        "start {held}",
        ("POST", "/sessions/{held}/start_now", None),
        lambda o, ids: _status(o, ids["held"])["hold_count"] >= 1,
        click=overflow("start", "held"),
    ),
    # a restart resets the ladder and asks the gate again: held at the limit, at the first rung
    Action(
        "restart",
        "restart {held}",
        ("POST", "/sessions/{held}/restart", None),
        lambda o, ids: (
            _status(o, ids["held"])["hold_count"] == 1 and _status(o, ids["held"])["hold_turn_kind"] == "restart"
        ),
    ),
    # seed 000's claim: a weight, and a budget of its own as a multiple of the fleet's slots
    Action(
        "weight",
        "weight {held} 0.5",
        ("PATCH", "/sessions/{held}", {"weight": 0.5}),
        lambda o, ids: _status(o, ids["held"])["weight"] == 0.5 and "queue_pass" in o.armed,
    ),
    Action(
        "capacity",
        "capacity {held} 1.5x",
        ("PATCH", "/sessions/{held}", {"capacity_multiplier": 1.5}),
        lambda o, ids: _status(o, ids["held"])["capacity_multiplier"] == 1.5 and "queue_pass" in o.armed,
    ),
    # a person's own spend limit: the cap, and a queue pass so a session held on it starts
    Action(
        "cap",
        "cap {held} 5",
        ("PATCH", "/sessions/{held}", {"cost_cap_usd": 5}),
        lambda o, ids: _status(o, ids["held"])["cost_cap_usd"] == 5.0 and "queue_pass" in o.armed,
    ),
    Action(
        "pause queue",
        "pause {held} queue",
        ("POST", "/sessions/{held}/pause", None),
        lambda o, ids: _status(o, ids["held"])["pause_reason"] is not None,
    ),
    # seed 001, "Joining the queue on purpose", with halt: the running turn stops where it stands
    # and the session sleeps in the spot queue with the prompt it resumes with (P22 items 5 and 9)
    Action(
        "pause queue halt",
        "pause {run} queue halt with pick up the failing test",
        ("POST", "/sessions/{run}/pause", {"halt": True, "resume_prompt": "pick up the failing test"}),
        lambda o, ids: (
            _status(o, ids["run"])["pause_reason"] == "user_spot_queue"
            and _status(o, ids["run"])["pause_resume_prompt"] == "pick up the failing test"
            and _status(o, ids["run"])["scheduling_class"] == "spot"
            and [t["status"] for t in o.rows["turns"] if t["session_id"] == ids["run"]] == ["halted"]
        ),
    ),
    Action(
        "pause until",
        "pause {held} until 2h",
        ("POST", "/sessions/{held}/pause", {"until": (T0 + timedelta(hours=2)).isoformat()}),
        lambda o, ids: _status(o, ids["held"])["wake_at"] == T0 + timedelta(hours=2),
    ),
    Action(
        "hold",
        "hold #{held} for 1h checking the deploy",
        ("POST", "/holds", {"selector": "#{held}", "ttl_seconds": 3600, "reason": "checking the deploy"}),
        lambda o, ids: len(o.rows["operator_holds"]) == 1 and o.rows["operator_holds"][0]["armer"] == ACTOR,
    ),
    Action(
        "release",
        "release {hold}",
        ("POST", "/holds/{hold}/release", None),
        lambda o, ids: o.rows["operator_holds"][0]["released_by"] == ACTOR and "queue_pass" in o.armed,
        click=button(HOLD_RELEASE, "hold"),
        setup=_operator_hold,
    ),
    Action(
        "resume",
        "resume",
        ("POST", "/queue/resume", None),
        lambda o, ids: o.rows["queue_holds"][0]["released_at"] is not None,
        click=button(QUEUE_RESUME, None),
        setup=_queue_hold,
    ),
    Action(
        "reply",
        "reply {held} please also check the logout path",
        ("POST", "/sessions/{held}/messages", {"text": "please also check the logout path"}),
        lambda o, ids: len(o.rows["human_messages"]) == 1,
    ),
]


def take(world: World, action: Action, surface: str) -> Outcome:
    """Run `action` through `surface`, then the alarms it armed; what it left behind."""
    ids = world.ids
    world.deferrer.advance(timedelta(0))  # the world's own alarms first: only the action's are compared
    world.deferrer.armed.clear()
    world.events.clear()
    audit = AuditLines()
    logging.getLogger("pacer").addHandler(audit)
    try:
        if surface == "rest":
            method, path, body = action.rest
            answer = world.http.request(method, _fill(path, ids), json=_fill(body, ids))
            assert answer.status_code < 300, (action.name, answer.text)
        elif surface == "console":
            reply = console.answer(world.pacer, action.command.format(**ids), user=ACTOR)
            assert not reply.startswith("error:"), (action.name, reply)
        elif surface == "slack":
            text = _slack(world, action.command.format(**ids))
            assert "usage:" not in text, (action.name, text)
        else:
            assert action.click is not None
            text = _click(world, action.click(ids))
            assert "usage:" not in text, (action.name, text)
        armed = tuple(sorted(set(world.deferrer.armed)))
        world.deferrer.advance(timedelta(0))
    finally:
        logging.getLogger("pacer").removeHandler(audit)
    return Outcome(armed, tuple(world.events), tuple(audit.lines), _rows(world))


@pytest.mark.parametrize("action", ACTIONS, ids=[a.name for a in ACTIONS])
def test_every_surface_does_the_same(action: Action, tmp_path: Path, mock: MockSlack) -> None:
    surfaces = [s for s in SURFACES if s != "block_kit" or action.click is not None]
    outcomes: dict[str, Outcome] = {}
    for surface in surfaces:
        with world(tmp_path / surface, mock) as here:
            if action.setup is not None:
                action.setup(here)
            outcomes[surface] = take(here, action, surface)
            ids = dict(here.ids)
        assert action.expect(outcomes[surface], ids), (
            f"{action.name} through {surface} did not do its work: {outcomes[surface]}"
        )
    reference = outcomes["rest"]
    for surface, outcome in outcomes.items():
        assert _differences(outcome.rows, reference.rows) == [], f"{action.name}: {surface} left other rows than rest"
        for part in ("events", "armed", "audit"):
            assert getattr(outcome, part) == getattr(reference, part), (
                f"{action.name}: {surface} differs from rest in {part}"
            )
