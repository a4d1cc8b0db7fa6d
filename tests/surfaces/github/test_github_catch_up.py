"""No event lost (issue #31, item 5): the leader re-scans trigger labels and asks GitHub to
redeliver what failed, at its election and hourly, against the loopback GitHub stand-in with real
PyGithub (a real App JWT, signed with a key made here) and Pacer's whole app on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine, insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from bot.config.settings import load
from bot.github.catch_up import CATCH_UP, LOOKED_HOOK_ID, REDELIVER_HOOK_ID, catch_up, rescan_labels
from bot.github.intake import INTAKE_HOOK_ID, intake_key
from bot.runtime import process
from bot.serve.app import create_app
from integrations.github.catch_up import OpenLabeled
from integrations.github.client import GithubClients
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger, WebhookDelivery
from tests.support.github_support import SECRET, FakeGithub, headers, issue_payload, make_pacer, serving

_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
).decode()


@pytest.fixture
def fake() -> Iterator[FakeGithub]:
    server = FakeGithub().start()
    yield server
    server.stop()


def _app_env(fake: FakeGithub) -> dict[str, str]:
    return {"GITHUB_APP_ID": "424242", "GITHUB_APP_PRIVATE_KEY": _KEY, "GITHUB_API_URL": fake.url + "/"}


def _triggers(engine: Engine, now: Any) -> None:
    with session_scope(engine) as db:
        db.add(Trigger(name="label", kind="github_label", prompt_template="{{ title }}", config={"label": "pacer"},
                       created_at=now))
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=now))


def _sessions(engine: Engine) -> list[tuple[int, str]]:
    with session_scope(engine) as db:
        return [(s.id or 0, s.title) for s in db.exec(select(Session).order_by(Session.id)).all()]


def _wait(what: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("waited in vain")


def _opened_while_down(fake: FakeGithub, number: int) -> str:
    """An issue opened while Pacer was down: GitHub's delivery of it failed."""
    return fake.attempt("issues", issue_payload("opened", number=number, title=f"Opened {number}"), ok=False)


def test_downtime_a_label_starts_its_session_once_and_a_failed_delivery_is_redelivered_once(
    tmp_path: Path, fake: FakeGithub
) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/p.db", "GITHUB_WEBHOOK_SECRET": SECRET, **_app_env(fake)}
    # Pacer is stopped: a trigger label is added (its delivery fails), an issue is opened (so is its).
    fake.label("octo/app", 7, "pacer", actor="alice")
    opened = _opened_while_down(fake, 9)
    first = fake.deliveries[0]["guid"]

    def started() -> Any:
        pacer = process.build(load(env, toml_path=None))
        return pacer, create_app(pacer, start_scheduler=True)

    pacer, app = started()
    _triggers(pacer.engine, pacer.clock.now())
    with serving(app) as url:
        fake.webhook_url = url
        # On start the leader catches up: the label's session at once, the failed ones asked for again.
        _wait(lambda: len(fake.redelivered) == 2)
        fake.settle()
        assert app.state.github.drain(10)
        sessions = _wait(lambda: len(_sessions(pacer.engine)) == 2 and _sessions(pacer.engine))
        assert [title for _, title in sessions] == ["octo/app#7 Issue 7", "octo/app#9 Opened 9"]
        asked = {d["guid"] for d in fake.deliveries if d["id"] in fake.redelivered}
        assert asked == {first, opened}
        assert all(d["status"] == "OK" for d in fake.deliveries if d["redelivery"])
    # A restart catches up again: nothing new is created, nothing is asked for twice.
    looked = _looked(pacer.engine)
    pacer2, app2 = started()
    with serving(app2) as url:
        fake.webhook_url = url
        _wait(lambda: _looked(pacer2.engine) > looked)
        assert len(fake.redelivered) == 2
        assert len(_sessions(pacer2.engine)) == 2


def _looked(engine: Engine) -> Any:
    """When the last look at the App's deliveries began."""
    with session_scope(engine) as db:
        return db.exec(select(WebhookDelivery.received_at).where(WebhookDelivery.hook_id == LOOKED_HOOK_ID)).one()


@pytest.fixture
def hooked(engine: Engine, clock: Any, deferrer: Any, fake: FakeGithub) -> Iterator[Any]:
    """Pacer's app on loopback (no scheduler) with an App's credentials; the fake redelivers to it."""
    pacer = make_pacer(engine, clock, deferrer, **_app_env(fake))
    _triggers(engine, clock.now())
    fake.now = clock.now
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url:
        fake.webhook_url = url
        yield pacer, app


def test_the_catch_up_is_a_leader_job_run_at_election_then_hourly(hooked: Any) -> None:
    pacer, _app = hooked
    assert CATCH_UP in pacer.ctx.jobs
    assert pacer.extras[process.LEADER_JOBS][CATCH_UP].total_seconds() == 3600


def test_a_redelivery_that_fails_again_is_not_asked_for_twice(hooked: Any, fake: FakeGithub) -> None:
    pacer, app = hooked
    _opened_while_down(fake, 9)
    fake.webhook_url = "http://127.0.0.1:9"  # Pacer is unreachable still: the redelivery fails too
    pacer.ctx.run_job(CATCH_UP)
    fake.settle()
    assert len(fake.redelivered) == 1 and [d["status"] for d in fake.deliveries] == ["Invalid HTTP Response: 503"] * 2
    pacer.ctx.run_job(CATCH_UP)
    assert len(fake.redelivered) == 1  # asked once per guid, whatever became of it
    with session_scope(pacer.engine) as db:
        assert len(db.exec(select(WebhookDelivery).where(WebhookDelivery.hook_id == REDELIVER_HOOK_ID)).all()) == 1
    assert _sessions(pacer.engine) == []


def test_a_delivery_pacer_recorded_though_github_marked_it_failed_is_not_redelivered(
    hooked: Any, fake: FakeGithub
) -> None:
    pacer, app = hooked
    payload = issue_payload("opened", number=11)
    body = json.dumps(payload).encode()
    guid = "bbbb0000-0000-0000-0000-000000000011"
    answer = httpx.post(
        f"{fake.webhook_url}/github/webhook", content=body, headers=headers("issues", body, delivery=guid)
    )
    assert answer.status_code == 202
    assert app.state.github.drain(10)
    fake.attempt("issues", payload, ok=False, guid=guid)  # answered after GitHub's 10 s: a failure to GitHub
    fake.attempt("issues", issue_payload("opened", number=12), ok=True)  # answered OK: nothing to do
    assert pacer.ctx.run_job(CATCH_UP).redelivered == []
    assert fake.redelivered == []


def test_a_label_added_by_a_bot_starts_nothing_on_the_rescan(hooked: Any, fake: FakeGithub) -> None:
    pacer, _app = hooked
    fake.label("octo/app", 7, "pacer", actor="ci-bot", author="carol", association="NONE", delivered=True)
    fake.issue_events["octo/app#7"][-1]["actor"]["type"] = "Bot"
    assert pacer.ctx.run_job(CATCH_UP).created == []
    assert _sessions(pacer.engine) == []


def test_with_a_plain_token_the_label_rescan_alone_applies(engine: Engine, clock: Any, deferrer: Any,
                                                           fake: FakeGithub) -> None:
    pacer = make_pacer(engine, clock, deferrer, GITHUB_TOKEN="ghp_token", GITHUB_API_URL=fake.url + "/")
    _triggers(engine, clock.now())
    fake.label("octo/app", 7, "pacer", actor="alice")
    create_app(pacer, start_scheduler=False)
    caught = pacer.ctx.run_job(CATCH_UP)
    assert len(caught.created) == 1 and caught.redelivered == []
    assert not [c for c in fake.calls if c.path.startswith("/app/")]  # no App: no deliveries asked about
    assert pacer.ctx.run_job(CATCH_UP).created == []


def test_two_rescans_at_once_create_one_session_and_the_ledger_refuses_a_second_key(
    any_engine: Engine, clock: Any, deferrer: Any, fake: FakeGithub
) -> None:
    pacer = make_pacer(any_engine, clock, deferrer, **_app_env(fake))
    _triggers(any_engine, clock.now())
    fake.label("octo/app", 7, "pacer", actor="alice")
    port = OpenLabeled(GithubClients(base_url=fake.url, app_id="424242", private_key=_KEY, write_seconds=0))
    both = threading.Barrier(2, timeout=10)

    class Together(OpenLabeled):
        def labeler(self, *args: Any) -> Any:  # both have found the label unclaimed before either records
            found = port.labeler(*args)
            both.wait()
            return found

    together = Together(port.clients)
    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda: results.append(rescan_labels(pacer, together))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(len(r) for r in results) == [0, 1]
    assert len(_sessions(any_engine)) == 1
    with session_scope(any_engine) as db:
        trigger_id = db.exec(select(Trigger.id).where(Trigger.kind == "github_label")).one()
    with pytest.raises(IntegrityError), session_scope(any_engine) as db:  # the backstop: one key per issue
        db.connection().execute(insert(WebhookDelivery.__table__), {  # type: ignore[attr-defined]
            "hook_id": INTAKE_HOOK_ID, "delivery_id": intake_key(trigger_id or 0, "octo/app#7"),
            "event": "session:0", "received_at": clock.now()})
    # The label's own delivery, arriving late, creates nothing either.
    assert catch_up(pacer, together, None).created == []
