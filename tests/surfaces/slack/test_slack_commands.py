"""`/pacer` through the real app: a fast empty ack, then the answer at the command's response_url.

The requests are signed like Slack's, sent over loopback into the FastAPI app that mounts the
real Bolt app; the answer is whatever `bot.chat.answers.answer` says, posted to the mock's response_url.
"""

from __future__ import annotations

import threading
import time

from bot.slack.edge import DEFAULT_WORK_THREADS
from scheduler.store.models import Policy
from scheduler.store.sessions import NewSession, create_session
from tests.support.slack_mock import Call, MockSlack


def _queue(slack, count: int, *, requester: str = "UMEM") -> list[int]:  # type: ignore[no-untyped-def]
    ids = []
    with slack.pacer.db() as db:
        for n in range(count):
            row = create_session(
                db, NewSession(title=f"task {n}", genesis="api", requester=requester), now=slack.pacer.clock.now()
            )
            ids.append(int(row.id))
    return ids


def _answer(mock: MockSlack, name: str = "cmd") -> Call:
    (call,) = mock.wait_for_method(f"/response/{name}")
    return call


def test_help_is_acked_empty_and_fast_then_answered_ephemerally(slack, mock: MockSlack) -> None:
    started = time.perf_counter()
    ack = slack.command("help")
    elapsed = time.perf_counter() - started
    assert ack.status_code == 200
    assert ack.text == ""
    assert elapsed < 1.5, f"ack took {elapsed:.3f}s"  # Slack gives up at 3 s; loaded CI stays far below
    answer = _answer(mock)
    assert answer.body["response_type"] == "ephemeral"
    assert "`/pacer help [command]`" in answer.body["text"]
    assert answer.body["blocks"][0]["type"] == "section"


def test_the_ack_does_not_wait_for_the_answer(slack, mock: MockSlack) -> None:
    # Occupy every thread of the work pool: the ack must still come back at once, and the
    # answer only once the pool is free again.
    gate = threading.Event()
    for _ in range(DEFAULT_WORK_THREADS):
        slack.surface.edge.submit("occupy the pool", gate.wait, 5)
    ack = slack.command("help")
    assert ack.status_code == 200
    assert mock.calls_to("/response/cmd") == []
    gate.set()
    assert "`/pacer help [command]`" in _answer(mock).body["text"]


def test_queue_answers_with_the_ranked_rows_and_their_menus(slack, mock: MockSlack) -> None:
    ids = _queue(slack, 3)
    assert slack.command("queue", user="UMEM").status_code == 200
    answer = _answer(mock)
    assert answer.body["response_type"] == "ephemeral"
    assert "3 waiting" in answer.body["text"]
    rows = [b for b in answer.body["blocks"] if b["type"] == "section" and "accessory" in b]
    assert [r["text"]["text"].split("*")[1] for r in rows] == [f"#{i}" for i in ids]
    assert rows[0]["accessory"]["action_id"] == "pacer.queue_row"
    assert f"promote:{ids[0]}" in {o["value"] for o in rows[0]["accessory"]["options"]}


def test_a_long_queue_stays_within_fifty_blocks(slack, mock: MockSlack) -> None:
    _queue(slack, 70)
    slack.command("queue")
    blocks = _answer(mock).body["blocks"]
    assert len(blocks) <= 50
    assert "more not shown" in blocks[-1]["elements"][0]["text"]


def test_a_bad_argument_gets_one_line_and_the_usage(slack, mock: MockSlack) -> None:
    slack.command("promote forty-two")
    text = _answer(mock).body["text"]
    assert text.startswith(":warning:")
    assert "usage: `/pacer promote" in text
    assert "Traceback" not in text


def test_someone_off_the_roster_is_told_which_role_is_needed_and_nothing_changes(slack, mock: MockSlack) -> None:
    (sid,) = _queue(slack, 1)
    slack.command(f"promote {sid}", user="UNOBODY")
    text = _answer(mock).body["text"]
    assert "needs the operator role" in text
    assert "UNOBODY" in text
    with slack.pacer.db() as db:
        from scheduler.store.models import Session

        assert db.get(Session, sid).scheduling_class is None


def test_an_answer_the_channel_should_see_goes_in_channel(slack, mock: MockSlack) -> None:
    slack.command("policy set reserve_5h=10", user="UOPS")
    answer = _answer(mock)
    assert answer.body["response_type"] == "in_channel"
    with slack.pacer.db() as db:
        from sqlmodel import select

        assert db.exec(select(Policy)).one().reserve_5h_pct == 10


def test_each_command_is_answered_at_its_own_response_url(slack, mock: MockSlack) -> None:
    for n in range(5):
        slack.command("help", name=f"cmd{n}")
    slack.settle()
    assert sorted(c.path for c in mock.calls if c.path.startswith("/response/")) == [
        f"/response/cmd{n}" for n in range(5)
    ]


def test_policy_shows_the_decision_a_spot_session_gets_now_and_why(slack, mock: MockSlack) -> None:
    from tests.support.harness import SetQuota

    quota = SetQuota(clock=slack.pacer.clock)
    quota.spend_out()
    slack.pacer.ctx.ports.quota = quota
    assert slack.command("policy", user="UMEM").status_code == 200
    text = _answer(mock).body["text"]
    assert "*Decision for a new spot session:* *held* by the spot budget" in text
    assert "this ceiling also pauses running spot work" in text
    assert "Held until the 5-hour window rolls over at 2026-11-02 13:00 UTC, which refills the budget." in text
    assert "$1,000.00 spent of $1,000.00 · $200.00 reserved for priority · spot budget spent ($200.00 over)" in text
    assert (
        "*When the pool comes back:* Work resumes in 4h 00m (2026-11-02 13:00 UTC): 1 account is out of capacity."
        in text
    )
    assert text.index("*Decision for a new spot session:*") < text.index(
        "*Scheduling policy*"
    )  # the decision, then the settings
