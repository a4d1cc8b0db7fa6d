"""Where a cost cap comes from besides a person typing it (P15 item 1): a `pacer:cap-<usd>` label
on a GitHub issue, and a trigger's default (`config.cost_cap_usd`), which a label or an explicit
cap overrides. A label that is not a cap sets nothing; a bad trigger default is refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from bot.github.events import IntakeEvent, cost_cap_of, parse
from bot.github.intake import github_event
from bot.triggers.kind_config import check_config
from scheduler.errors import InvalidInput
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from tests.support.github_support import issue_payload
from tests.support.harness import build, new, row


@pytest.fixture
def ctx(any_engine: Engine, clock: Any) -> Any:
    context, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=1, wired=True)
    return context


def _event(**kw: Any) -> IntakeEvent:
    parsed = parse("issues", issue_payload("opened", **kw), bot_login="pacer[bot]")
    assert isinstance(parsed, IntakeEvent), parsed
    return parsed


def _trigger(ctx: Any, clock: Any, config: dict[str, Any]) -> int:
    with session_scope(ctx.engine) as db:
        trigger = Trigger(
            created_at=clock.now(), name="t", kind="github_issue", prompt_template="{{ title }}", config=config
        )
        db.add(trigger)
        db.flush()
        return trigger.id or 0


@pytest.mark.parametrize(
    ("labels", "cap"),
    [
        (("pacer:cap-5",), 5.0),
        (("Pacer:Cap-2.50", "bug"), 2.5),
        (("pacer:cap-$3",), 3.0),
        (("pacer:cap-9", "pacer:cap-4"), 4.0),
        (("pacer:cap-0",), None),
        (("pacer:cap-lots",), None),
        (("pacer:cap-",), None),
        (("bug",), None),
    ],
)
def test_a_cap_label_names_the_cap(labels, cap) -> None:
    assert cost_cap_of(labels) == cap


def test_a_cap_label_on_a_new_issue_caps_its_session_over_the_trigger_default(ctx: Any, clock: Any) -> None:
    _trigger(ctx, clock, {"cost_cap_usd": 10})
    (labelled,) = github_event(ctx, _event(number=1, labels=("pacer:cap-5",)))
    (plain,) = github_event(ctx, _event(number=2))
    (bad,) = github_event(ctx, _event(number=3, labels=("pacer:cap-abc",)))
    assert (row(ctx, labelled).cost_cap_usd, row(ctx, plain).cost_cap_usd, row(ctx, bad).cost_cap_usd) == (
        5.0,
        10.0,
        10.0,
    )


def test_an_explicit_cap_overrides_the_trigger_default(ctx: Any, clock: Any) -> None:
    tid = _trigger(ctx, clock, {"cost_cap_usd": 10})
    assert row(ctx, new(ctx, trigger_id=tid)).cost_cap_usd == 10.0
    assert row(ctx, new(ctx, trigger_id=tid, cost_cap_usd=2.0)).cost_cap_usd == 2.0


@pytest.mark.parametrize("cap", [-1, 0, "5", True, 2_000_000])
def test_a_bad_trigger_default_is_refused_naming_the_key(cap) -> None:
    with pytest.raises(InvalidInput, match=r"config\.cost_cap_usd: .* is not a cost cap; give US dollars above 0"):
        check_config("github_issue", {"cost_cap_usd": cap})


def test_a_good_trigger_default_is_kept_on_every_kind() -> None:
    assert check_config("github_issue", {"cost_cap_usd": 5})["cost_cap_usd"] == 5.0
    assert check_config("schedule", {"cron": "0 * * * *", "cost_cap_usd": 2.5})["cost_cap_usd"] == 2.5


def test_a_cap_label_added_later_caps_the_issue_session_and_strangers_cannot(ctx: Any, clock: Any) -> None:
    _trigger(ctx, clock, {})
    (sid,) = github_event(ctx, _event(number=2))
    stranger = parse(
        "issues",
        issue_payload("labeled", number=2, label="pacer:cap-1", author="alice", association="NONE"),
        bot_login="pacer[bot]",
    )
    github_event(ctx, stranger)
    assert row(ctx, sid).cost_cap_usd is None  # only people with write access steer work
    github_event(
        ctx,
        parse(
            "issues", issue_payload("labeled", number=2, label="pacer:cap-7.5", sender="carol"), bot_login="pacer[bot]"
        ),
    )
    assert row(ctx, sid).cost_cap_usd == 7.5
    github_event(
        ctx,
        parse(
            "issues", issue_payload("labeled", number=2, label="pacer:cap-abc", sender="carol"), bot_login="pacer[bot]"
        ),
    )
    assert row(ctx, sid).cost_cap_usd == 7.5  # not a cap: an ordinary label
