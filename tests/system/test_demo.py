"""`pacer serve --demo`: sample triggers installed, and the sample events fed over real HTTP into
a running Pacer — sessions arrive, some run, some hold."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import httpx
from sqlmodel import select

from bot.api.callers import DEMO_TOKEN_KEY
from bot.runtime.process import Pacer
from bot.serve import demo
from bot.serve.app import create_app
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from tests.support.api_client import Server, make_api, settings_for
from tests.support.harness import build


class Later:
    """An ASGI app set after the server is made: the demo is installed, as `pacer serve` does,
    before the app reads its settings, yet the feed needs the server's URL."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def test_install_demo_adds_triggers_a_token_and_a_webhook_secret_and_every_trigger_kind_fires(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=2, turn_minutes=10, wired=True)
    pacer = Pacer(
        settings=settings_for(engine, PACER_API_TOKEN="", GITHUB_WEBHOOK_SECRET=""),
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        ctx=ctx,
    )
    later = Later()
    server = Server(later)
    demo.install_demo(pacer, base_url=server.url, pace_seconds=0)
    secret = pacer.settings.github_webhook_secret
    demo.install_demo(pacer, base_url=server.url, pace_seconds=0)  # a second start upserts, and keeps its secret
    assert secret and pacer.settings.github_webhook_secret == secret
    later.app = create_app(pacer, start_scheduler=False)
    server.start()
    try:
        with session_scope(engine) as db:
            kinds = sorted((t.name, t.kind) for t in db.exec(select(Trigger)))
        assert kinds == [
            ("demo-follow-up", "ao_event"),
            ("demo-hourly-sweep", "schedule"),
            ("demo-label-pacer", "github_label"),
        ]
        token = pacer.extras[DEMO_TOKEN_KEY]
        assert (
            httpx.get(f"{server.url}/api/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        )
        assert httpx.get(f"{server.url}/api/v1/sessions", headers={"Authorization": "Bearer guess"}).status_code == 401
        hooks = pacer.extras["on_start"]
        assert len(hooks) == 2
        for hook in pacer.extras["on_stop"]:
            hook(pacer)  # stopped before it starts: the feed runs, and no trickle after it
        hooks[0](pacer)  # what the app's lifespan does: the feed runs on its own thread
        feeder = next(t for t in threading.enumerate() if t.name == "pacer-demo")
        feeder.join(timeout=60)
        assert not feeder.is_alive()
        later.app.state.github.drain()  # the first turns the deliveries asked for
        for _ in range(12):  # ten-minute turns on two slots: every label session gets its turn
            deferrer.advance(timedelta(minutes=11))
        with session_scope(engine) as db:
            sessions = list(db.exec(select(Session)))
            names = {t.id: t.name for t in db.exec(select(Trigger))}
        fired = Counter(names[s.trigger_id] for s in sessions if s.trigger_id is not None)
        assert fired["demo-label-pacer"] == 3  # signed deliveries through /github/webhook
        assert fired["demo-hourly-sweep"] == 1  # invoked by hand
        assert fired["demo-follow-up"] >= 1  # a label session done
        sweep = next(s for s in sessions if s.trigger_id is not None and names[s.trigger_id] == "demo-hourly-sweep")
        assert sweep.title == "demo-hourly-sweep: Find the flakiest test and fix it."
    finally:
        server.stop()


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


def test_after_the_feed_a_trickle_keeps_events_coming_until_the_server_stops(engine, clock) -> None:
    """The feed is over in half a minute; the trickle sends one event every few seconds after it
    (here every 20 ms), each kind in turn, through the same endpoints, until it is told to stop."""
    api = make_api(engine, clock, max_sessions=3, turn_minutes=30, GITHUB_WEBHOOK_SECRET="demo-secret")
    try:
        demo.install_demo(api.pacer, base_url=api.server.url, pace_seconds=0)
        stop = threading.Event()
        seen: list[demo.Sent] = []
        sent: list[demo.Sent] = []
        trickling = threading.Thread(target=lambda: sent.extend(demo.trickle(
            api.server.url, "test-token-0123456789", github_secret="demo-secret", every=0.02, stop=stop,
            say=seen.append)))
        trickling.start()
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
        trickling.join(timeout=30)
        assert not trickling.is_alive() and sent == seen and len(sent) >= 6
        assert all(s.status in (201, 202) for s in sent), sent
        kinds = {s.what.split(" #")[0].split(" precedence=")[0] for s in sent}
        assert kinds == {
            "POST /github/webhook issues.labeled",
            "POST /api/v1/sessions spot",
            "POST /api/v1/sessions priority",
            "POST /api/v1/triggers/{id}/invoke demo-hourly-sweep",
        }
        api.server.app.state.github.close()
        with session_scope(engine) as db:
            assert len(list(db.exec(select(Session)))) >= len(sent)
    finally:
        api.close()
