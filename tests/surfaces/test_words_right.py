"""Words that are right (issue P21, item 3), on every surface people read: no reason code shown
as a word (the API keeps codes as codes in its fields), a hold sentence once per list and once
on the gate card, and `queue_reordered` only when the order moved.

Through the real app on loopback: signed Slack commands and an App Home event into Bolt, the
live page over HTTP, the sticky GitHub comment through PyGithub against a fake GitHub.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from bot.chat import answers
from bot.github.events import IntakeEvent, parse
from bot.github.intake import github_event
from integrations.github.client import GithubClients
from integrations.github.comments import PyGithubComments, StatusComments
from scheduler.engine.turns import submit_turn
from scheduler.pauses.parking import pause_into_spot_queue
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from scheduler.wiring import install
from tests.support.github_support import FakeGithub, issue_payload
from tests.support.harness import SetQuota, build, new, row
from tests.support.slack_mock import MockSlack, serving

TOKEN = "live-page-token-0123456789abcdef"
CODES = re.compile(
    r"\b(within_limits|at_utilization_limit|fleet_at_cap|user_spot_queue|operator_hold|preempted_by_priority"
    r"|spot_budget|pacing_curve|fleet_cap|no_snapshot|overtaken_by_class)\b"
)
GATE_SENTENCE = "Held by the spot gate's budget"


def _texts(value: Any, key: str | None = None) -> Iterator[str]:
    """Every string a person reads in a Slack payload: `text` fields, not ids or values."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v, key)
    elif isinstance(value, str) and key == "text":
        yield value


def _page_text(page: str) -> str:
    body = re.sub(r"<script.*?</script>|<style.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_no_surface_shows_a_reason_code_and_a_hold_sentence_is_said_once(
    engine, clock, deferrer, mock: MockSlack
) -> None:
    with serving(engine, clock, deferrer, mock, PACER_API_TOKEN=TOKEN) as slack:
        ctx = install(slack.pacer.ctx)  # every admission check production has, the operator's hold among them
        frozen = new(ctx, title="under the operator's hold", requester="UMEM")
        placed = answers.answer(slack.pacer, "UOPS", f"hold #{frozen} for 2h freeze", surface="console")
        assert placed.ok, placed.text
        submitted = submit_turn(ctx, frozen, "go")
        assert row(ctx, frozen).hold_reason == "operator_hold", (submitted, row(ctx, frozen))
        quota = SetQuota(clock=clock)
        quota.spend_out()
        ctx.ports.quota = quota
        held = [new(ctx, title=f"held {n}", requester="UMEM") for n in range(3)]
        for sid in held:
            assert submit_turn(ctx, sid, "go").reason == "at_utilization_limit"
        parked = new(ctx, title="parked on purpose", requester="UMEM")
        pause_into_spot_queue(ctx, parked)
        assert row(ctx, parked).pause_reason == "user_spot_queue"

        said: dict[str, str] = {}
        bodies: dict[str, Any] = {}
        commands = ["queue", "holds", "policy", "whatif --spot", *(f"why {sid}" for sid in [*held, parked, frozen])]
        for n, text in enumerate(commands):
            slack.command(text, user="UOPS", name=f"c{n}")
            (call,) = mock.wait_for_method(f"/response/c{n}")
            bodies[text] = call.body
            said[text] = "\n".join([call.body.get("text", ""), *_texts(call.body.get("blocks", []))])
        slack.event({"type": "app_home_opened", "user": "UMEM", "channel": "D0DM", "tab": "home"}, event_id="EvWords")
        (home,) = mock.wait_for_method("views.publish")
        said["App Home"] = "\n".join(_texts(home.body["view"]["blocks"]))
        with httpx.Client(base_url=str(slack.http.base_url), follow_redirects=True, timeout=30) as browser:
            page = browser.get(f"/?token={TOKEN}")
            state = browser.get("/live/state")
            detail = browser.get(f"/api/v1/sessions/{parked}", headers={"Authorization": f"Bearer {TOKEN}"})
        assert page.status_code == 200 and state.status_code == 200 and detail.status_code == 200
        said["live page"] = _page_text(page.text)
        said["live page, polled"] = _page_text(json.dumps(state.json()))

    shown = {where: CODES.findall(text) for where, text in said.items()}
    assert not any(shown.values()), {where: codes for where, codes in shown.items() if codes}
    assert "parked in the spot queue on purpose" in said[f"why {parked}"]
    assert "held: an operator's hold" in said[f"why {frozen}"], said[f"why {frozen}"]
    # The API keeps codes as codes, in its fields.
    assert detail.json()["waiting"]["headline"]["reason"] == "user_spot_queue"
    # One gate sentence for three sessions the gate holds alike: said at the first, named after.
    for shown_as in (bodies["holds"]["text"], "\n".join(_texts(bodies["holds"]["blocks"]))):
        assert shown_as.count(GATE_SENTENCE) == 1 and shown_as.count(f"the same as #{held[0]}") == 2, shown_as
    # The live page's gate card says the decision in a few words, and its sentence once.
    card = said["live page"].split("Queue", 1)[0]
    assert card.count(GATE_SENTENCE) == 1, card
    assert "A new spot session would wait: held by the spot budget ." in " ".join(card.split())


def test_a_parked_sessions_github_comment_says_why_in_words(engine, clock) -> None:
    """The comment showed the park's code (`Paused: auth_outage.`)."""
    fake = FakeGithub().start()
    try:
        ctx, _deferrer, _workers, quota = build(engine, clock, max_sessions=1)
        quota.spend_out()  # the spot session waits
        with session_scope(engine) as db:
            db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
        event = parse("issues", issue_payload("opened", number=7), bot_login="pacer[bot]")
        assert isinstance(event, IntakeEvent)
        (sid,) = github_event(ctx, event)
        with session_scope(engine) as db:  # as the sign-in outage parks a session (scheduler/holds/auth_outage.py)
            parked = db.get(Session, sid)
            assert parked is not None and parked.status == "waiting"
            parked.park_reason, parked.park_at = "auth_outage", clock.now() + timedelta(seconds=1)
        port = PyGithubComments(GithubClients(base_url=fake.url + "/", token="ghp_test", write_seconds=0))
        comment = StatusComments(engine, port, clock=clock).refresh(sid)
        body = fake.comments[comment]["body"]
    finally:
        fake.stop()
    assert "Paused: the provider's sign-in is failing." in body, body
    assert "auth_outage" not in body and not CODES.findall(body), body


@pytest.mark.parametrize(
    ("typed", "moves"),
    [("rank {low} below {high}", False), ("rank {high} below {low}", True), ("rank {low} 0", False),
     ("promote {low}", True)],
)
def test_queue_reordered_is_told_only_when_the_order_moved(api, typed: str, moves: bool) -> None:
    """`rank 5 below 6` answered "nothing changed" and still told everyone the queue was reordered."""
    ctx = api.ctx
    high, low = new(ctx, title="high", precedence=5), new(ctx, title="low", precedence=0)
    told: list[tuple[str, dict[str, Any]]] = []
    ctx.plugins.listeners.append(lambda event, context: told.append((event, context)))
    said = answers.answer(api.pacer, "alice", typed.format(high=high, low=low), surface="console")
    assert said.ok, said.text
    assert ("nothing changed" in said.text) is not moves, said.text
    assert [event for event, _ in told if event == "queue_reordered"] == (["queue_reordered"] if moves else [])
