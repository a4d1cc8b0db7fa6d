"""`pacer serve --demo`: sample triggers installed, and the sample events fed over real HTTP into
a running Pacer — sessions arrive, some run, some hold."""

from __future__ import annotations

import threading

from sqlmodel import select

from bot import demo
from bot.api.guard import DEMO_TOKEN_KEY
from scheduler.db import session_scope
from scheduler.models import Session, Trigger
from tests.api_client import make_api


def test_install_demo_adds_the_sample_triggers_and_a_token_for_this_run(engine, clock) -> None:
    api = make_api(engine, clock, PACER_API_TOKEN="")
    try:
        demo.install_demo(api.pacer, base_url=api.server.url, pace_seconds=0)
        demo.install_demo(api.pacer, base_url=api.server.url, pace_seconds=0)  # a second start upserts
        with session_scope(engine) as db:
            kinds = sorted((t.name, t.kind) for t in db.exec(select(Trigger)))
        assert kinds == [("demo-follow-up", "ao_event"), ("demo-hourly-sweep", "schedule"), ("demo-label-pacer", "github_label")]
        token = api.pacer.extras[DEMO_TOKEN_KEY]
        assert api.get("/sessions", token=token).status_code == 200
        assert api.get("/sessions", token="guess").status_code == 401
        hooks = api.pacer.extras["on_start"]
        assert len(hooks) == 2
        hooks[0](api.pacer)  # what the app's lifespan does: the feed runs on its own thread
        feeder = next(t for t in threading.enumerate() if t.name == "pacer-demo")
        feeder.join(timeout=30)
        assert not feeder.is_alive()
        with session_scope(engine) as db:
            sessions = list(db.exec(select(Session)))
        assert len(sessions) >= 8
    finally:
        api.close()


def test_the_feed_goes_through_the_real_endpoints_and_some_work_holds(engine, clock) -> None:
    api = make_api(engine, clock, max_sessions=3, turn_minutes=30)
    try:
        demo.install_demo(api.pacer, base_url=api.server.url, pace_seconds=0)
        seen: list[demo.Sent] = []
        sent = demo.feed(api.server.url, "test-token-0123456789", say=seen.append)
        assert sent == seen and all(s.status in (200, 201) for s in sent), sent
        assert sent[0].summary.startswith("[FleetPolicy] changed via api")
        created = [s for s in sent if s.what.startswith("POST /api/v1/sessions")]
        assert len(created) == 8
        assert any("started" in s.summary for s in created) and any("held (" in s.summary for s in created)
        invoked = next(s for s in sent if "invoke" in s.what)
        assert "api/" in invoked.summary
        holds = sent[-1]
        assert holds.what == "GET /api/v1/holds" and "held sessions" in holds.summary
        with session_scope(engine) as db:
            top = max((s for s in db.exec(select(Session)) if s.title.startswith("Regenerate")), key=lambda s: s.id)
        assert top.precedence == 55  # five above the top of the spot queue (50)
    finally:
        api.close()


def test_with_a_webhook_secret_the_feed_sends_signed_github_deliveries(engine, clock) -> None:
    api = make_api(engine, clock, max_sessions=3, turn_minutes=30, GITHUB_WEBHOOK_SECRET="demo-secret")
    try:
        demo.install_demo(api.pacer, base_url=api.server.url, pace_seconds=0)
        sent = demo.feed(api.server.url, "test-token-0123456789", github_secret="demo-secret", say=lambda s: None)
        deliveries = [s for s in sent if s.what.startswith("POST /github/webhook")]
        assert [s.status for s in deliveries] == [202, 202, 202], deliveries
        edge = api.server.app.state.github
        edge.close()  # drain the work done after each answer
        with session_scope(engine) as db:
            labelled = [s for s in db.exec(select(Session)) if s.genesis == "github_label"]
        assert len(labelled) == 3 and all(s.trigger_id is not None for s in labelled)
        assert sorted(s.prompt.splitlines()[0] for s in labelled) == [
            "Work on acme/demo#101: Login button does nothing on Safari",
            "Work on acme/demo#102: Flaky test: test_checkout_total",
            "Work on acme/demo#103: Docs: the quickstart skips the migration step",
        ]
        unsigned = api.client.post("/github/webhook", content=b"{}", headers={"X-GitHub-Event": "issues"})
        assert unsigned.status_code == 401
    finally:
        api.close()
