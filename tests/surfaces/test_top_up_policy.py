"""The backlog top-up thresholds as the operator sets them (seed 001, "Its sibling: the backlog
top-up ceiling" and "Every change to both ceilings is recorded"): the ceiling, its stretch and
its cooldown move from PATCH /api/v1/policy, `/pacer policy set` on Slack and the console, and
`pacer policy --set`, each through `change_policy`, each writing the same audit line but for the
surface; a bad value is refused naming the setting and its range, and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler.rules.top_up import TopUpPolicy
from scheduler.store.db import session_scope
from scheduler.store.models import PolicyAudit
from scheduler.store.policy import load_policy
from tests.support.api_client import make_api
from tests.support.paths import ROOT

MOVED = "top_up_ceiling 3 -> 5, top_up_stretch_minutes 0 -> 10, top_up_cooldown_minutes 30 -> 45"


@pytest.fixture
def api(any_engine, clock):
    api = make_api(any_engine, clock, max_sessions=4)
    yield api
    api.close()


def audit_lines(api) -> list[str]:
    with session_scope(api.ctx.engine) as db:
        return [
            a.line for a in db.exec(select(PolicyAudit).where(PolicyAudit.surface != "test").order_by(PolicyAudit.id))
        ]  # type: ignore[arg-type]


def top_up(api) -> TopUpPolicy:
    with session_scope(api.ctx.engine) as db:
        return load_policy(db).top_up


def reset(api) -> None:
    api.patch("/policy", {"top_up_ceiling": 3, "top_up_stretch_minutes": 0, "top_up_cooldown_minutes": 30})


def test_each_surface_sets_the_three_thresholds_with_one_audit_line_naming_it(api) -> None:
    r = api.patch(
        "/policy", {"top_up_ceiling": 5, "top_up_stretch_minutes": 10, "top_up_cooldown_minutes": 45}, actor="alice"
    )
    assert r.status_code == 200, r.text
    assert r.json()["audit"] == f"[FleetPolicy] changed via api by alice: {MOVED}"
    assert {
        k: r.json()["policy"][k] for k in ("top_up_ceiling", "top_up_stretch_minutes", "top_up_cooldown_minutes")
    } == {"top_up_ceiling": 5, "top_up_stretch_minutes": 10, "top_up_cooldown_minutes": 45}
    assert top_up(api) == TopUpPolicy(5, 10, 45)
    for surface, shown_as in (("slack", "slack:/pacer"), ("console", "console")):
        reset(api)
        reply = answers.answer(
            api.pacer, "alice", "policy set top_up=5 top_up_stretch=10 top_up_cooldown=45", surface=surface
        )
        assert reply.ok, reply.text
        assert top_up(api) == TopUpPolicy(5, 10, 45)
        assert audit_lines(api)[-1] == f"[FleetPolicy] changed via {shown_as} by alice: {MOVED}"
    api.patch("/policy", {"top_up_cooldown_minutes": 45})
    assert audit_lines(api)[-1] == f"[FleetPolicy] changed via console by alice: {MOVED}"  # nothing moved: no line


def test_pacer_policy_set_takes_the_same_keys_and_writes_the_same_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "USER": "ops"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "policy",
            "--set",
            "top_up=5",
            "--set",
            "top_up_stretch=10",
            "--set",
            "top_up_cooldown=45",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"Recorded: [FleetPolicy] changed via cli:pacer policy by ops: {MOVED}" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "bot.cli", "policy", "--set", "top_up_cooldown=0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "top_up_cooldown: '0' must be between 1 and 1,440" in bad.stdout


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"top_up_ceiling": -1}, "greater than or equal to 0"),
        ({"top_up_ceiling": 10_001}, "less than or equal to 10000"),
        ({"top_up_ceiling": "three"}, "valid integer"),
        ({"top_up_stretch_minutes": 1441}, "less than or equal to 1440"),
        ({"top_up_cooldown_minutes": 0}, "greater than or equal to 1"),
        ({"top_up_cooldown_minutes": 2.5}, "valid integer"),
    ],
)
def test_a_bad_threshold_over_the_api_is_422_naming_it_and_changes_nothing(api, body, says) -> None:
    r = api.patch("/policy", {"top_up_ceiling": 7, **body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == next(iter(body)) and says in r.json()["message"], r.json()
    assert top_up(api) == TopUpPolicy() and audit_lines(api) == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("policy set top_up=-1", "top_up: '-1' must be between 0 and 10,000"),
        ("policy set top_up=10001", "top_up: '10001' must be between 0 and 10,000"),
        ("policy set top_up_stretch=1441", "top_up_stretch: '1441' must be between 0 and 1,440"),
        ("policy set top_up=4 top_up_cooldown=0", "top_up_cooldown: '0' must be between 1 and 1,440"),
        ("policy set top_up_cooldown=30m", "top_up_cooldown: '30m' is not a whole number"),
    ],
)
def test_a_bad_threshold_in_policy_set_names_it_and_changes_nothing(api, line, message) -> None:
    reply = answers.answer(api.pacer, "alice", line, surface="slack")
    assert not reply.ok and message in reply.text and "usage: `/pacer policy [set gating=on|off" in reply.text, (
        reply.text
    )
    assert top_up(api) == TopUpPolicy() and audit_lines(api) == []


def test_change_policy_refuses_a_threshold_out_of_range_with_the_rule(any_db) -> None:
    from scheduler.errors import InvalidInput
    from scheduler.store.policy import change_policy
    from tests.support.harness import T0

    for key, raw, rule in (
        ("top_up_ceiling", "-2", "top_up_ceiling: '-2' must be a whole number from 0 (top-up off) to 10,000"),
        ("top_up_cooldown_minutes", 0, "top_up_cooldown_minutes: 0 must be a whole number from 1 to 1,440 minutes"),
        ("top_up_stretch_minutes", True, "top_up_stretch_minutes: True must be a whole number from 0 to 1,440 minutes"),
    ):
        with pytest.raises(InvalidInput) as refused:
            change_policy(any_db, {"max_sessions": 5, key: raw}, surface="test", actor=None, now=T0)
        assert str(refused.value) == rule and refused.value.field == key
