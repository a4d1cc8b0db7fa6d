"""Every log line says which request and which session it belongs to: a real app under uvicorn,
the real log pipeline (bot.observe.logs: the Ids filter, both formats), real GitHub deliveries and API
requests. The request id is the caller's X-Request-ID when it is sane, else a new one, and comes
back in the answer; the session id is set where a decision for one session runs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from bot.observe.logs import TEXT_FORMAT, Ids, JsonFormatter
from bot.runtime.notify import LogNotifier, session_fields
from scheduler.engine.attempt import Block
from scheduler.log_context import about_session, name_session
from scheduler.ports import Outcome
from scheduler.testing import VirtualClock
from tests.support.api_client import Api, make_api
from tests.support.github_support import SECRET, headers, issue_payload


class Captured:
    """The pipeline's own handler (the Ids filter, the JSON format) on the root logger, into memory."""

    def __init__(self, formatter: logging.Formatter) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.addFilter(Ids())
        self.handler.setFormatter(formatter)

    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


@pytest.fixture
def captured() -> Iterator[Captured]:
    """The root logger at INFO into memory; Pacer's loggers let through whatever an earlier test in
    this process set them to, and put back afterwards."""
    found = Captured(JsonFormatter())
    root = logging.getLogger()
    ours = [root, *(logger for name, logger in logging.Logger.manager.loggerDict.items()
                    if name.startswith(("pacer", "scheduler")) and isinstance(logger, logging.Logger))]
    before = [(logger, logger.level, logger.disabled) for logger in ours]
    for logger in ours:
        logger.setLevel(logging.INFO if logger is root else logging.NOTSET)
        logger.disabled = False
    root.addHandler(found.handler)
    yield found
    root.removeHandler(found.handler)
    for logger, level, disabled in before:
        logger.setLevel(level)
        logger.disabled = disabled


@pytest.fixture
def api(engine: Engine, clock: VirtualClock) -> Iterator[Api]:
    served = make_api(engine, clock, max_sessions=1, GITHUB_WEBHOOK_SECRET=SECRET)
    served.ctx.ports.notifier = LogNotifier(session_fields(engine))  # production's: "session #N started"
    yield served
    served.close()


def test_the_callers_request_id_is_kept_and_echoed_and_a_bad_or_missing_one_is_made_up(api: Api) -> None:
    kept = api.client.get("/healthz", headers={"X-Request-ID": "lb-7f3a.42:x"})
    assert kept.headers["x-request-id"] == "lb-7f3a.42:x"
    forged = api.client.get("/healthz", headers={"X-Request-ID": "a\tb INFO pacer: forged line"})
    made = [forged.headers["x-request-id"], api.client.get("/healthz").headers["x-request-id"],
            api.client.get("/no/such/route").headers["x-request-id"]]
    assert all(len(rid) == 16 and int(rid, 16) >= 0 for rid in made) and len(set(made)) == 3


def test_every_line_of_a_delivery_carries_its_request_id_and_session_lines_their_session(
    api: Api, captured: Captured
) -> None:
    trigger = {
        "name": "label-pacer",
        "kind": "github_label",
        "config": {"label": "pacer"},
        "prompt_template": "{{ title }}",
    }
    assert api.post("/triggers", trigger).status_code == 201
    body = json.dumps(issue_payload("labeled", number=41, label="pacer", labels=("pacer",))).encode()
    answer = api.client.post(
        "/github/webhook", content=body, headers={**headers("issues", body), "X-Request-ID": "delivery-41"}
    )
    assert answer.status_code == 202 and answer.headers["x-request-id"] == "delivery-41"
    (session_id,) = answer.json()["sessions"]
    api.server.app.state.github.drain()  # the first turn, gated after the answer on the intake thread

    entries = captured.entries()
    first = next(i for i, e in enumerate(entries) if e.get("request_id") == "delivery-41")
    pacer_lines = [e for e in entries[first:] if e["logger"].startswith("pacer")]
    # Recorded on one thread, the first turn gated on another: all of it under the delivery's id.
    assert pacer_lines and all(e.get("request_id") == "delivery-41" for e in pacer_lines), captured.lines()
    intake = [e for e in pacer_lines if "→ session #" in e["message"]]
    started = [e for e in pacer_lines if e["message"].startswith(f"session #{session_id} started")]
    assert len(intake) == 1 and len(started) == 1
    assert intake[0]["session_id"] == started[0]["session_id"] == session_id
    assert (started[0]["event"], started[0]["genesis"], started[0]["class"]) == ("started", "github_label", "spot")
    assert not any("session #None" in e["message"] for e in entries)


def test_a_notices_json_line_carries_its_event_reason_class_and_genesis_as_fields(api: Api, captured: Captured) -> None:
    placed = api.post("/holds", {"selector": "class:spot", "reason": "a deploy"}, actor="alice")
    assert placed.status_code == 201, placed.text
    created = api.post("/sessions", {"prompt": "one"})
    assert created.status_code == 201, created.text
    session = created.json()["session"]
    assert api.post(f"/holds/{placed.json()['hold_id']}/release", actor="alice").status_code == 200
    api.settle()
    api.workers.outcome = lambda _request: Outcome.RATE_LIMITED  # its turn meets the provider's limit
    api.deferrer.advance(timedelta(minutes=21))

    notices = [e for e in captured.entries() if e["logger"] == "pacer.notices"]
    fields = ("event", "reason", "class", "genesis", "session_id")
    assert [{k: e[k] for k in fields if k in e} for e in notices] == [
        {"event": "operator_hold"},  # about the queue, not one session
        {"event": "held", "reason": "operator_hold", "class": "spot", "genesis": "api", "session_id": session["id"]},
        {"event": "started", "class": "spot", "genesis": "api", "session_id": session["id"]},
        {"event": "queue_hold", "reason": "rate_limit", "session_id": session["id"]},  # the hold its turn caused
        {"event": "held", "reason": "queue_hold", "class": "spot", "genesis": "api", "session_id": session["id"]},
    ], captured.lines()
    (hold_line,) = [e for e in captured.entries() if e["logger"] == "pacer.queue_holds"]
    assert hold_line["reason"] == "rate_limit" and hold_line["level"] == "WARNING"
    assert (session["scheduling_class"], session["genesis"]) == ("spot", "api")
    assert notices[1]["message"].startswith(f"session #{session['id']} held: held by alice")  # the words stay


def test_a_line_logged_inside_a_decision_names_its_session_without_saying_so(api: Api, captured: Captured) -> None:
    def logs_and_admits(_db: Any, session: Any, _now: Any) -> Block | None:
        logging.getLogger("pacer.check").info("checked")  # says nothing of the session itself
        return None

    api.ctx.plugins.admission_checks.insert(0, logs_and_admits)
    created = api.client.post(
        "/api/v1/sessions", json={"prompt": "one"}, headers={**api.headers(), "X-Request-ID": "api-1"}
    )
    assert created.status_code == 201
    session_id = created.json()["session"]["id"]
    checked = [e for e in captured.entries() if e["logger"] == "pacer.check"]
    assert checked and all(e["session_id"] == session_id and e["request_id"] == "api-1" for e in checked)


def test_the_text_format_puts_the_ids_after_the_logger_and_nothing_when_there_are_none() -> None:
    text = Captured(logging.Formatter(TEXT_FORMAT))
    log = logging.getLogger("pacer.example")
    log.addHandler(text.handler)
    log.propagate = False
    try:
        log.warning("outside")
        with about_session():
            name_session(12)
            log.warning("inside")
        log.warning("named", extra={"session_id": 5})
    finally:
        log.removeHandler(text.handler)
        log.propagate = True
    outside, inside, named = text.lines()
    assert outside.split(" ", 3)[3] == "pacer.example: outside"
    assert inside.split(" ", 3)[3] == "pacer.example [session=12]: inside"
    assert named.split(" ", 3)[3] == "pacer.example [session=5]: named"
