"""A priority session takes a slot, in virtual time (seed 001, "A priority session takes a
slot", "Who yields", "The pause is graceful, and often free", "It joins the queue that already
exists", "Turning it off")."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import SQLModel, select

from scheduler.engine.fleet import running_fleet
from scheduler.engine.pause import is_standing
from scheduler.engine.records import hold_job_id
from scheduler.engine.turns import submit_turn
from scheduler.pauses import preemption
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.rules.waiting import waiting_reason
from scheduler.store.db import make_engine, session_scope
from scheduler.store.models import HumanMessage, Session
from scheduler.store.policy import ensure_policy, load_policy
from scheduler.store.sessions import is_spot
from scheduler.testing import VirtualClock
from tests.support.harness import T0
from tests.support.sweeping import Scene

M = timedelta(minutes=1)


def full_fleet(
    engine,
    clock,
    *precedences: int,
    minutes: float = 60,
    max_sessions: int = 3,
    lengths: dict[int, float] | None = None,
) -> tuple[Scene, list[int]]:
    """A fleet of spot sessions filling every slot, created a minute apart (oldest first);
    `lengths` sets the turn length of some of them, by position."""
    scene = Scene(engine, clock, max_sessions=max_sessions, turn_minutes=minutes)
    ids = []
    for i, p in enumerate(precedences or (0,) * max_sessions):
        ids.append(scene.start(precedence=p, minutes=(lengths or {}).get(i)))
        scene.advance(minutes=1)
    return scene, ids


def edit(scene: Scene, sid: int, **values) -> None:
    with session_scope(scene.ctx.engine) as db:
        s = db.get(Session, sid)
        for k, v in values.items():
            setattr(s, k, v)
        db.add(s)


def marked(scene: Scene) -> list[int]:
    with session_scope(scene.ctx.engine) as db:
        return [s.id for s in db.exec(select(Session).where(Session.preempt_mark_at.is_not(None)))]


def test_a_priority_start_into_a_full_fleet_marks_the_lowest_spot_session(engine, clock) -> None:
    scene, (a, b, c) = full_fleet(engine, clock, 5, 0, 10)
    p = scene.start(cls="priority", title="urgent fix")
    assert marked(scene) == [b]
    v = scene.row(b)
    assert v.preempted_by_id == p and v.pending_sleep and v.preemption_count == 1 and v.last_preempted_at is None
    assert (v.pause_reason, v.paused_by, v.status) == ("preempted_by_priority", "spot_quota", "running")
    assert scene.running_ids() == {a, b, c, p}  # graceful: the victim keeps its turn
    banner = waiting_reason(v, clock.now()).headline.sentence
    assert f"priority session #{p} (urgent fix)" in banner and "3 of 3 slots" in banner
    assert "keeps its turn and sleeps into the spot queue when the turn ends" in banner


@pytest.mark.parametrize(
    ("rule", "setup", "victim"),
    [
        (
            "fewest prior preemptions",
            {0: {"preemption_count": 2}, 1: {"preemption_count": 0}, 2: {"preemption_count": 1}},
            1,
        ),
        ("least human involvement", {"messages": {0: 1, 1: 0, 2: 2}}, 1),
        ("newest, which has least in flight to lose", {}, 2),
        ("precedence before all of them", {0: {"precedence": -5, "preemption_count": 3}, "messages": {0: 4}}, 0),
    ],
)
def test_who_yields(engine, clock, rule, setup, victim) -> None:
    scene, ids = full_fleet(engine, clock)
    for index, values in setup.items():
        if index != "messages":
            edit(scene, ids[index], **values)
    with session_scope(engine) as db:
        for index, n in setup.get("messages", {}).items():
            for _ in range(n):
                db.add(
                    HumanMessage(
                        session_id=ids[index], actor="U1", surface="slack_thread", text="hi", created_at=clock.now()
                    )
                )
    scene.start(cls="priority")
    assert marked(scene) == [ids[victim]], rule


@pytest.mark.parametrize(
    "why", ["asked to sleep at its turn end", "already carries a pause record", "preempted 29 minutes ago"]
)
def test_who_is_never_marked(engine, clock, why) -> None:
    scene, (low, mid, _high) = full_fleet(engine, clock, 0, 5, 10)
    if why == "asked to sleep at its turn end":
        wake_me_up_later(scene.ctx, low, clock.now() + timedelta(hours=1))
    elif why == "already carries a pause record":
        edit(
            scene, low, pause_reason="user_spot_queue", paused_by="spot_quota", pause_at=clock.now(), pending_sleep=True
        )
    else:
        edit(scene, low, last_preempted_at=clock.now() - 29 * M, preemption_count=1)
    scene.start(cls="priority")
    assert marked(scene) == [mid], why


def test_the_cooldown_ends_after_thirty_minutes(engine, clock) -> None:
    scene, (low, _mid, _high) = full_fleet(engine, clock, 0, 5, 10)
    edit(scene, low, last_preempted_at=clock.now() - 30 * M, preemption_count=1)
    scene.start(cls="priority")
    assert marked(scene) == [low]


def test_a_priority_session_taking_follow_ups_every_two_minutes_takes_exactly_one_victim(engine, clock) -> None:
    scene, spot = full_fleet(engine, clock, minutes=120)
    scene.every("ceiling_sweep")
    p = scene.session(cls="priority", minutes=1)
    ever: set[int] = set()
    widest = 0
    for i in range(8):  # sixteen minutes of follow-ups: through the grace window and the sweep after it
        submit_turn(scene.ctx, p, f"follow-up {i}", kind="follow_up")
        ever |= set(marked(scene))
        widest = max(widest, len(scene.running_ids()))
        scene.advance(minutes=2)
    assert len(ever) == 1 and widest == 4
    victim = ever.pop()
    v = scene.row(victim)
    # Past its grace with the fleet at its cap, the one victim was halted; a slot its preemptor
    # freed between two follow-ups went back to it at once (the queue, not the sweep), and its
    # cooldown kept the next follow-up from taking it again: the fleet runs one over instead.
    assert v.last_preempted_at is not None and v.preemption_count == 1
    assert v.status == "running" and v.pause_reason is None
    assert sum(scene.row(s).preemption_count for s in spot) == 1


def test_a_second_start_with_a_mark_outstanding_takes_nobody(engine, clock) -> None:
    scene, _spot = full_fleet(engine, clock)
    p = scene.session(cls="priority", minutes=1)
    submit_turn(scene.ctx, p, "one")
    scene.advance(minutes=2)  # its turn ended; the mark stands (the slot is promised)
    submit_turn(scene.ctx, p, "two", kind="follow_up")
    assert len(marked(scene)) == 1


def test_one_mark_per_outstanding_slot(engine, clock) -> None:
    scene, (a, b, _c) = full_fleet(engine, clock, 0, 1, 2)
    scene.start(cls="priority")
    scene.start(cls="priority")  # a second priority session needs a slot of its own
    assert sorted(marked(scene)) == [a, b]


def test_graceful_the_victim_sleeps_at_its_turn_end_into_the_queue(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, lengths={1: 7})  # b ends inside its grace window
    assert submit_turn(scene.ctx, b, "b's next message", kind="follow_up").outcome == "queued"
    p = scene.start(cls="priority", minutes=120)
    scene.advance(minutes=5)
    v = scene.row(b)
    assert v.status == "waiting" and v.pause_reason == "preempted_by_priority" and not v.pending_sleep
    report = scene.sweep()
    assert report.marks.slept == [b] and report.resumed == []  # the fleet is still full
    v = scene.row(b)
    assert v.preempt_mark_at is None and v.last_preempted_at == clock.now() - 5 * M and v.preempted_by_id == p
    assert [t.status for t in scene.turns(b)] == ["done"]  # nothing interrupted: no tool call lost
    assert (
        "waits in the spot queue for a free slot and a quota window under both targets"
        in waiting_reason(v, clock.now()).headline.sentence
    )
    scene.advance(minutes=120)  # slots free again (the other turns end, then the priority one):
    # the queue pass a turn's end requests offers the room to b first, the paused session at the
    # front once past the cooldown, and it goes back with the message it was holding
    assert "b's next message" in [r.prompt for r in scene.workers.submitted if r.session_id == b]
    assert scene.row(b).pause_reason is None and scene.sweep().resumed == []  # nothing left for the sweep


def test_a_victim_that_finished_with_nothing_after_it_lost_nothing_and_is_done(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, lengths={1: 7})
    scene.start(cls="priority", minutes=120)
    scene.advance(minutes=5)
    report = scene.sweep()
    assert report.marks.finished == [b] and scene.row(b).status == "done" and scene.row(b).pause_reason is None


def test_reached_needs_input_still_marked_is_slept_into_the_queue(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, lengths={1: 7})

    def another_owner(work, session, turn, result, step) -> bool:
        if session.id == b:
            session.status = "needs_input"  # someone else took charge: the sleep never happened
            return True
        return False

    scene.ctx.plugins.turn_finished.append(another_owner)
    submit_turn(scene.ctx, b, "queued for later", kind="follow_up")
    scene.start(cls="priority", minutes=120)
    scene.advance(minutes=5)
    assert scene.row(b).status == "needs_input"
    report = scene.sweep()
    assert (
        report.marks.slept == [b]
        and scene.row(b).status == "waiting"
        and scene.row(b).pause_reason == "preempted_by_priority"
    )


def test_past_grace_and_still_at_cap_the_turn_is_halted(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10)
    scene.start(cls="priority", minutes=120)
    scene.advance(minutes=10)
    assert scene.sweep().marks.halted == []  # inside its grace: left alone
    scene.advance(minutes=1)
    report = scene.sweep()
    assert report.marks.halted == [b]
    v = scene.row(b)
    assert v.status == "waiting" and v.pause_reason == "preempted_by_priority" and v.pause_count == 1
    assert scene.turns(b)[-1].status == "halted" and len(scene.running_ids()) == 3
    assert any(n["session_id"] == b for n in scene.events("paused"))


def test_a_fleet_back_under_its_cap_releases_the_mark_and_uncharges_the_ledger(engine, clock) -> None:
    # The priority turn ends at minute 6 and a (started at minute 0) at 7: the fleet is strictly
    # under its cap with the victim still running, so the preemption was never needed.
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, lengths={0: 7})
    scene.start(cls="priority", minutes=3)
    scene.advance(minutes=5)
    report = scene.sweep()
    assert report.marks.released == [b]
    v = scene.row(b)
    assert (v.preemption_count, v.last_preempted_at, v.pause_reason, v.pending_sleep, v.pause_count) == (
        0,
        None,
        None,
        False,
        0,
    )
    assert b in scene.running_ids()
    # It cost neither a recorded preemption nor a cooldown: the next priority start can take it.
    scene.start(cls="priority")
    scene.start(cls="priority")
    assert b in marked(scene)


def test_a_mark_older_than_an_hour_is_released_whatever_the_fleet_says(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, minutes=300)
    scene.start(cls="priority", minutes=300)
    edit(scene, b, preempt_mark_at=clock.now() - 61 * M)  # its provenance broke
    report = scene.sweep()
    assert report.marks.stale == [b] and b in scene.running_ids() and scene.row(b).pause_reason is None


def test_a_mark_with_no_readable_stamp_is_neither_escalated_nor_released(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, minutes=300)
    scene.start(cls="priority", minutes=300)
    edit(scene, b, preempt_mark_at=None)
    scene.advance(minutes=30)
    report = scene.sweep()
    assert report.marks.halted == report.marks.released == [] and b in scene.running_ids()
    assert scene.row(b).pause_reason == "preempted_by_priority"


def test_a_resumed_victim_is_not_preempted_again_within_thirty_minutes(engine, clock) -> None:
    scene, (a, b, _c) = full_fleet(engine, clock, 5, 0, 10, minutes=300)
    scene.every("ceiling_sweep")
    scene.start(cls="priority", minutes=16)
    scene.advance(minutes=15)
    assert scene.row(b).status == "waiting"  # halted past its grace
    scene.advance(minutes=6)  # the priority turn has ended: the sweep resumes it into the free slot
    assert b in scene.running_ids()
    mark_time = scene.row(b).last_preempted_at
    scene.start(cls="priority")  # a second priority session, 20 minutes after the first mark
    assert clock.now() - mark_time < timedelta(minutes=30)
    assert marked(scene) == [a]


def test_switched_off_the_fleet_runs_one_over(engine, clock) -> None:
    scene, _spot = full_fleet(engine, clock)
    scene.policy(preemption_enabled=False)
    scene.start(cls="priority")
    assert marked(scene) == [] and len(scene.running_ids()) == 4


def test_with_nothing_eligible_nothing_happens(engine, clock) -> None:
    scene, spot = full_fleet(engine, clock)
    for sid in spot:
        wake_me_up_later(scene.ctx, sid, clock.now() + timedelta(hours=1))
    p = scene.start(cls="priority")
    assert marked(scene) == [] and len(scene.running_ids()) == 4
    assert scene.events("preempt_none") == [{"session_id": p, "running": 3, "slots": 3}]


def test_a_runtime_that_spends_no_quota_takes_no_slot(engine, clock) -> None:
    scene, _spot = full_fleet(engine, clock)
    scene.start(cls="priority", runtime="codex")
    assert marked(scene) == []


def test_preemption_never_raises_and_never_holds(engine, clock, monkeypatch, caplog) -> None:
    scene, _spot = full_fleet(engine, clock)

    def broken(*args, **kwargs):
        raise RuntimeError("ledger unreadable")

    monkeypatch.setattr(preemption, "rank_victims", broken)
    with caplog.at_level(logging.ERROR, logger="pacer.preemption"):
        p = scene.start(cls="priority")
    assert p in scene.running_ids() and marked(scene) == []
    assert "the start goes on without it" in caplog.text


# --------------------------------------------------------------------------- the property

ARRIVAL = st.tuples(
    st.integers(min_value=0, max_value=60),  # minute it arrives
    st.sampled_from(["priority", "spot", "spot"]),
    st.integers(min_value=1, max_value=90),  # minutes its turn runs
    st.integers(min_value=-2, max_value=2),  # precedence
)


class Ledger:
    """Watches every admitted start after preemption has run, and checks it on the spot."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.unmatched: set[int] = set()  # priority sessions whose current turn found no victim

    def __call__(self, work, session, decision) -> None:
        db, ctx, now = work.db, work.ctx, work.now
        policy = load_policy(db)
        if is_spot(session, policy) or not ctx.runtime(session.runtime).spends_quota:
            return
        self.unmatched.discard(session.id)
        fleet = [s for s, _t in running_fleet(db, ctx, policy) if s.id != session.id]
        new = [s for s in fleet if s.preempt_mark_at == now and s.preempted_by_id == session.id]
        standing = [s for s in fleet if is_standing(s) and s not in new]
        full = len(fleet) - len(standing) >= min(policy.max_sessions, ctx.limits.agent_workers)
        eligible = new + [
            s for s in fleet
            if s not in new and is_spot(s, policy) and not s.bookkeeping and not s.pending_sleep
            and s.pause_reason is None and s.preempt_mark_at is None
            and (s.last_preempted_at is None or now - s.last_preempted_at >= preemption.COOLDOWN)
        ]
        for victim in new:  # the mark left the ledger's stamp alone: it still reads as before the mark
            assert is_spot(victim, policy) and not victim.bookkeeping, "only spot work yields"
            assert victim.last_preempted_at is None or now - victim.last_preempted_at >= preemption.COOLDOWN, (
                "inside its cooldown"
            )
        if full and policy.preemption_enabled and eligible:
            assert len(new) == 1, "one mark per outstanding slot"
            lowest = min(s.precedence for s in eligible)
            assert new[0].precedence == lowest, "the spot queue read backwards"
        else:
            assert new == []
        if full and not new:
            self.unmatched.add(session.id or 0)  # no eligible victim, or switched off: one over


def check_after_sweep(scene: Scene, ledger: Ledger, submitted: list[int]) -> None:
    now = scene.clock.now()
    with session_scope(scene.ctx.engine) as db:
        policy = load_policy(db)
        fleet = [s for s, _t in running_fleet(db, scene.ctx, policy)]
        marks = [s for s in fleet if is_standing(s)]
        assert all(now - s.preempt_mark_at <= preemption.GRACE for s in marks), "a mark outlived its grace"
        running_priority = {s.id for s in fleet if not is_spot(s, policy)}
        excess = len(fleet) - min(policy.max_sessions, scene.ctx.limits.agent_workers)
        assert excess <= len(running_priority & ledger.unmatched) + len(marks), (
            "over the cap with no reason the seed gives"
        )
        for s in db.exec(select(Session).where(Session.id.in_(submitted))):
            sid = s.id or 0
            owned = (
                s.status in ("running", "done")
                or (s.pause_reason is not None and s.paused_by == "spot_quota")
                or (s.hold_reason is not None and scene.deferrer.next_run(hold_job_id(sid)) is not None)
            )
            assert owned, f"session #{sid} is {s.status} with nothing that will bring it back"


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrivals=st.lists(ARRIVAL, min_size=1, max_size=7), preempt=st.booleans())
def test_the_fleet_exceeds_its_cap_only_for_the_seeds_reasons_and_no_session_is_lost(arrivals, preempt) -> None:
    engine = make_engine("sqlite://")
    SQLModel.metadata.create_all(engine)
    with session_scope(engine) as db:
        ensure_policy(db)
    clock = VirtualClock(T0)
    scene = Scene(engine, clock, max_sessions=2)
    scene.policy(preemption_enabled=preempt)
    ledger = Ledger(scene)
    scene.ctx.plugins.before_start.append(ledger)
    submitted: list[int] = []
    scene.every("ceiling_sweep", after=lambda _report: check_after_sweep(scene, ledger, submitted))
    for minute, cls, length, precedence in sorted(arrivals):
        scene.deferrer.run_until(T0 + timedelta(minutes=minute))
        sid = scene.session(cls=cls, minutes=length, precedence=precedence)
        submit_turn(scene.ctx, sid, f"work for #{sid}")
        submitted.append(sid)
    for _ in range(48):  # at most a day: every session must come out the other side
        if all(scene.row(s).status == "done" for s in submitted):
            break
        scene.advance(minutes=30)
    assert {scene.row(s).status for s in submitted} == {"done"}
    engine.dispose()
