"""The auth-outage park (seed 001, "Three parks, one headline" and "Precedence decides who gets
the headroom back"): with every login in the pool signed out no turn starts; sessions are parked
with their turn kept, the un-park sweep owns them (no re-check ladder), and once a login can
serve it wakes them in queue order through the gate."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler import wiring
from scheduler.engine.records import hold_job_id
from scheduler.engine.turns import submit_turn
from scheduler.ports import AccountReading, QuotaReading
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from tests.support.api_client import make_api
from tests.support.harness import SetQuota, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class PoolQuota(SetQuota):
    """The pool's windows with its accounts' statuses, as the pool source reads them."""

    statuses: list[str] = field(default_factory=list)

    def read(self, now: datetime) -> QuotaReading:
        accounts = tuple(AccountReading(f"acct{i}", status, 0.1, 0.1) for i, status in enumerate(self.statuses))
        return replace(super().read(now), accounts=accounts)


@pytest.fixture
def api(engine, clock):
    api = make_api(engine, clock, max_sessions=2, turn_minutes=30)
    api.ctx.ports.quota = PoolQuota(clock, statuses=["needs_reauth", "needs_reauth"])
    yield api
    api.close()


def sweep(api) -> object:
    return wiring.run_periodic(api.ctx, "auth_outage_sweep")


def turns(api) -> list[Turn]:
    with session_scope(api.ctx.engine) as db:
        return list(db.exec(select(Turn)))


def test_with_every_login_signed_out_work_of_both_classes_is_parked_not_started(api) -> None:
    ctx = api.ctx
    urgent = new(ctx, genesis="command", scheduling_class="priority", prompt="fix prod")
    spot = new(ctx, genesis="api", prompt="tidy")
    for sid, prompt in ((urgent, "fix prod"), (spot, "tidy")):
        sub = submit_turn(ctx, sid, prompt)
        assert (sub.outcome, sub.reason) == ("held", "auth_outage"), sub
        parked = row(ctx, sid)
        assert (parked.park_reason, parked.status, parked.hold_prompt) == ("auth_outage", "waiting", prompt)
        assert parked.hold_retry_at is None and hold_job_id(sid) not in api.deferrer.pending()  # the sweep owns it
    assert turns(api) == []

    why = answers.answer(api.pacer, "alice", f"why {urgent}", surface="console").text
    assert "every account in the login pool (2) needs to sign in again" in why, why
    assert "un-park sweep" in why

    assert sweep(api) == {"parked": -1}  # still signed out: nothing moves
    assert row(ctx, urgent).park_reason == "auth_outage" and turns(api) == []


def test_once_a_login_serves_the_sweep_wakes_the_parked_in_queue_order_through_the_gate(api) -> None:
    ctx = api.ctx
    urgent = new(ctx, genesis="command", scheduling_class="priority", prompt="fix prod")
    low = new(ctx, genesis="api", precedence=10, prompt="low")
    high = new(ctx, genesis="api", precedence=50, prompt="high")
    mid = new(ctx, genesis="api", precedence=30, prompt="mid")
    for sid in (urgent, low, high, mid):
        assert submit_turn(ctx, sid, row(ctx, sid).prompt).reason == "auth_outage"

    ctx.ports.quota.statuses = ["needs_reauth", "active"]
    woke = sweep(api)
    started = {t.session_id for t in turns(api)}
    assert urgent in started and high in started, woke
    # Two slots: the priority session and the highest-ranked spot one; the rest wait in the
    # spot queue as ordinary holds with a re-check of their own, no longer parked.
    assert low not in started and mid not in started
    for sid in (low, mid):
        waiting = row(ctx, sid)
        assert waiting.park_reason is None and waiting.hold_reason == "fleet_at_cap"
        assert hold_job_id(sid) in api.deferrer.pending()
    assert row(ctx, high).park_reason is None


def test_a_pool_over_its_quota_is_spent_not_signed_out(api) -> None:
    ctx = api.ctx
    ctx.ports.quota.statuses = ["quota_exceeded", "needs_reauth"]
    sid = new(ctx, genesis="command", scheduling_class="priority", prompt="go")
    assert submit_turn(ctx, sid, "go").outcome == "started"
    assert row(ctx, sid).park_reason is None


def test_start_now_on_a_parked_session_keeps_it_parked_while_no_login_serves(api) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="alice", prompt="go")
    assert submit_turn(ctx, sid, "go").reason == "auth_outage"
    said = answers.answer(api.pacer, "alice", f"start {sid}", surface="console")
    assert said.ok and "sign in again" in said.text, said.text
    assert row(ctx, sid).park_reason == "auth_outage" and turns(api) == []


def test_the_sweep_leaves_a_session_asleep_on_its_wake_and_the_slot_to_the_next(api) -> None:
    """Seed 001, "A pause outranks precedence": a parked session asleep on a wake still ahead is
    not started by the un-park sweep (its wake is its next event); the slot goes to the next in
    queue order, and the wake, still armed, is the one that asks for its turn."""
    from scheduler.engine.records import wake_job_id
    from scheduler.pauses.sleep import wake_me_up_later

    ctx = api.ctx
    ctx.ports.quota.statuses = ["active"]
    running = new(ctx, genesis="api", prompt="busy")
    assert submit_turn(ctx, running, "busy").outcome == "started"
    ctx.ports.quota.statuses = ["needs_reauth"]
    sleeper = new(ctx, genesis="api", precedence=50, prompt="later")
    next_one = new(ctx, genesis="api", precedence=10, prompt="now")
    for sid in (sleeper, next_one):
        assert submit_turn(ctx, sid, row(ctx, sid).prompt).reason == "auth_outage"
    wake_at = wake_me_up_later(ctx, sleeper, ctx.clock.now() + timedelta(hours=2))

    ctx.ports.quota.statuses = ["active"]
    sweep(api)

    started = {t.session_id for t in turns(api)}
    assert next_one in started and sleeper not in started, started
    asleep = row(ctx, sleeper)
    assert (asleep.status, asleep.park_reason, asleep.wake_at) == ("waiting", None, wake_at)
    assert wake_job_id(sleeper) in api.deferrer.pending()
