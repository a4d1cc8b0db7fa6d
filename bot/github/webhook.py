"""`POST /github/webhook`: GitHub's deliveries become intake, each exactly once.

Order per request, cheapest refusal first; nothing is parsed before it is verified:

    405  any method but POST (a browser opening the URL learns what it is)
    503  GITHUB_WEBHOOK_SECRET is unset (the route exists so a misconfigured hook says why)
    413  the body passes PACER_MAX_BODY_BYTES (its Content-Length, then the bytes actually read)
    401  X-Hub-Signature-256 missing, not `sha256=...`, or not HMAC-SHA256(secret, raw body)
         (constant-time compare); each says which
    400  a signed body that is not a JSON object, or an actionable event without X-GitHub-Delivery
    200  ping; events and actions Pacer does not act on; Pacer's own events; a redelivery
    202  an event Pacer acts on: recorded now, worked on after the answer; the App installed on
         repositories (bot/github/install.py: its labels are made there after the answer)

A delivery about the pull request Pacer opened — a check, check suite or workflow run completed
with a failure, a review or a comment on a line (`bot.github.feedback`) — is recorded the same
way, by `bot.github.fixes.record_feedback` in the same transaction.

Every answer is JSON with a `message` saying what happened (templates/github/webhook_*.j2), so
GitHub's "Recent Deliveries" shows why; a refusal also carries `error`, a code a script can read.

Durability, the seed's promise that a burst "creates each session exactly once and loses none":
the delivery row — unique on (X-GitHub-Hook-ID, X-GitHub-Delivery) — and every decision that is
only rows (each session with its rendered prompt, prerequisites, a class change, an operator
hold) commit in ONE transaction before the answer. A redelivery reuses its GUID, so its insert
hits the constraint and the whole transaction rolls back: it creates nothing and is answered 200.
The slow part (the gate behind each first turn, StartNow, archive; the status comment) runs on one
worker thread after the answer. Should the process die in between, start-up recovery gives every
committed session without a turn its first turn. GitHub's signature carries no timestamp, so the
delivery record is also what stops a replayed delivery.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import json
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from bot.github import events, feedback, install
from bot.github.fixes import record_feedback
from bot.github.intake import IntakeSettings, record_github
from bot.github.plan import GithubPlan, finish_github_plans
from bot.runtime.adapters import github_clients
from bot.runtime.http_body import read_bounded
from bot.runtime.process import Pacer
from integrations.github.labels import LabelPort, PyGithubLabels
from integrations.tracked_pool import TrackedPool, run_guarded
from scheduler.front import WebhookDelivery, session_scope
from templates import error_text, render

log = logging.getLogger("pacer.github")

PATH = "/github/webhook"
SIGNATURE_PREFIX = "sha256="
# Follow-up work yields to deliveries: it waits for a lull this long between requests ...
LULL_SECONDS = 0.05
# ... but no item waits longer than this for one, so a steady stream still gets its work done.
MAX_YIELD_SECONDS = 2.0
_DELIVERY = insert(WebhookDelivery.__table__)  # type: ignore[attr-defined]  # Core: no ORM object to build
RECORD_THREADS = 8  # PostgreSQL: writers that may record deliveries at once
# Plans finished together at most: a burst's first turns decided in one transaction each this
# many, which holds their rows' locks for a fraction of a second.
FINISH_BATCH = 50


def signature(secret: bytes, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub sends for `body`."""
    return SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def is_signed(secret: bytes, header: str | None, body: bytes) -> bool:
    if not secret or not header:
        return False
    return hmac.compare_digest(signature(secret, body).encode(), header.strip().encode("utf-8", "replace"))


def signature_refusal(secret: bytes, header: str | None, body: bytes) -> Answer | None:
    """None when `header` signs `body`; otherwise the 401 saying what is wrong with it."""
    if is_signed(secret, header, body):
        return None
    if not header or not header.strip():
        return Answer(401, "webhook_unsigned", error="unsigned")
    if not header.strip().startswith(SIGNATURE_PREFIX):
        return Answer(401, "webhook_signature_scheme", error="bad_signature")
    return Answer(401, "webhook_signature_mismatch", error="bad_signature")


@dataclass(frozen=True)
class Answer:
    status: int
    template: str
    values: Mapping[str, Any] = field(default_factory=dict)
    plan: GithubPlan | None = None
    error: str | None = None  # a refusal's code: unsigned, bad_signature, malformed, ...
    headers: Mapping[str, str] | None = None

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"message": render(f"github/{self.template}.j2", **self.values)}
        if self.error is not None:
            body["error"] = self.error
        if self.plan is not None:
            body["sessions"] = self.plan.created_ids
        return JSONResponse(body, status_code=self.status, headers=dict(self.headers) if self.headers else None)


class GithubEdge:
    """The runtime, the intake settings, the threads that record deliveries, and one worker
    thread for the work done after the answer.

    One thread on purpose: follow-up work is a handful of short transactions per event, and on
    SQLite every writer queues on one lock anyway; a second thread would only contend with the
    requests being answered. For the same reason the worker yields to deliveries: during a burst
    (a bulk relabel) each batch of plans waits for a lull of LULL_SECONDS, at most
    MAX_YIELD_SECONDS, so the answers GitHub times stay fast and the follow-up catches up right
    after, FINISH_BATCH plans at a time. Nothing waits on that follow-up but the sessions
    themselves, whose rows are already committed.
    """

    def __init__(self, pacer: Pacer, *, intake: IntakeSettings | None = None, labels: LabelPort | None = None) -> None:
        self.pacer = pacer
        clients = github_clients(pacer.settings) if labels is None else None
        self.labels = labels or (PyGithubLabels(clients) if clients is not None else None)
        self.intake = intake or IntakeSettings.from_settings(pacer.settings)
        self.secret = str(pacer.settings.github_webhook_secret or "").encode()
        self.bot_login = str(pacer.settings.github_bot_login or "")
        # Deliveries are recorded on threads of their own, handed over straight from the event
        # loop (no thread-pool limiter or lock in between). SQLite takes one writer at a time,
        # so one thread: deliveries queue on it in order, for free, rather than in SQLite's busy
        # handler (whose sleeps grow to 100 ms and would set the tail latency) or contending
        # for the GIL.
        threads = 1 if pacer.settings.sqlite else RECORD_THREADS
        self._recorder = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="github-record")
        self._pool = TrackedPool(1, "github-intake")
        self._lock = threading.Lock()
        self._plans: deque[GithubPlan] = deque()  # recorded, answered, not yet finished
        self._in_flight = 0
        self._last_delivery = 0.0  # time.monotonic() of the last delivery seen

    async def record(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """`take` on a recording thread (with this request's id for its log lines); the event loop
        goes on reading other requests."""
        here = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._recorder, here.run, self.take, headers, body)

    def take(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """Decode, route and record one verified delivery (runs on a recording thread)."""
        with self._lock:
            self._in_flight += 1
        try:
            return self._take(headers, body)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._last_delivery = time.monotonic()

    def _take(self, headers: Mapping[str, str], body: bytes) -> Answer:
        payload, problem = decode(body, headers.get("content-type", ""))
        if payload is None:
            return Answer(400, "webhook_malformed", {"problem": problem}, error="malformed")
        event_name = headers.get("x-github-event", "").strip()
        if event_name == "ping":
            log.info("github: ping from hook %s", headers.get("x-github-hook-id", "?"))
            return Answer(200, "webhook_pong", {"hook_id": headers.get("x-github-hook-id", "")})
        installed = install.installed(event_name, payload)
        if installed is not None and installed.repositories:
            return self._installed(installed)
        found = feedback.parse(event_name, payload, bot_login=self.bot_login)
        parsed = events.parse(event_name, payload, bot_login=self.bot_login) if found is None else found
        if isinstance(parsed, events.Ignored):
            log.debug("github: %s", parsed.reason)
            return Answer(200, "webhook_ignored", {"reason": parsed.reason})
        delivery_id = headers.get("x-github-delivery", "").strip()
        if not delivery_id:
            return Answer(400, "webhook_no_delivery", error="no_delivery")
        return self._record(
            parsed, hook_id=headers.get("x-github-hook-id", "").strip(), delivery_id=delivery_id, event_name=event_name
        )

    def _record(
        self, event: events.IntakeEvent | feedback.Feedback, *, hook_id: str, delivery_id: str, event_name: str
    ) -> Answer:
        name = f"{event_name}.{event.action}"
        now = self.pacer.clock.now()
        try:
            with session_scope(self.pacer.engine) as db:
                row = {"hook_id": hook_id[:100], "delivery_id": delivery_id[:100], "event": name, "received_at": now}
                try:
                    db.connection().execute(_DELIVERY, row)  # insert first: the unique constraint decides
                except IntegrityError:
                    db.rollback()
                    log.info(
                        "github: delivery %s (hook %s) already taken; a redelivery creates nothing",
                        delivery_id,
                        hook_id or "-",
                    )
                    return Answer(200, "webhook_redelivery", {"delivery": delivery_id})
                plan = (
                    record_github(db, event, now=now, settings=self.intake)
                    if isinstance(event, events.IntakeEvent)
                    else GithubPlan(
                        actor=f"github:{getattr(event, 'reviewer', '') or event.source}",
                        issue=event.issue_key,
                        feedback=record_feedback(db, event, now=now, budget=self.intake.fix_budget),
                    )
                )
        except Exception as exc:  # answered 500 and logged: the catch-up asks GitHub to redeliver
            log.exception("github: delivery %s could not be recorded", delivery_id)
            return Answer(500, "webhook_failed", {"error": type(exc).__name__}, error="failed")
        steered = sorted({*plan.steered_ids, *plan.feedback.session_ids})
        values = {"event": name, "issue": event.issue_key, "created": plan.created_ids, "steered": steered}
        return Answer(202, "webhook_accepted", values, plan)

    def _installed(self, what: install.Installed) -> Answer:
        """The App on more repositories: make its labels there after the answer. Idempotent, so a
        redelivery needs no record."""
        values = {
            "repositories": what.repositories,
            "labels": [label.name for label in install.LABELS],
            "credentials": self.labels is not None,
        }
        if self.labels is None:
            return Answer(200, "webhook_installed", values)
        self.submit(
            f"labels on {', '.join(what.repositories)}", install.make_labels, self.labels, what, self.pacer.engine
        )
        return Answer(202, "webhook_installed", values)

    def submit(self, what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run func(*args) after the answer; an exception is logged with `what`, never raised."""

        def guarded() -> Any:
            self._wait_for_lull()
            return run_guarded(log, f"github: {what}", func, *args)

        return self._pool.submit(guarded)

    def finish(self, plan: GithubPlan) -> Future[Any]:
        """Do what a recorded delivery asks for after its answer. Plans wait in order for the
        follow-up thread, which takes up to FINISH_BATCH of them at a time: a burst's first turns
        are then decided a batch to a transaction (`finish_github_plans`)."""
        with self._lock:
            self._plans.append(plan)
        return self._pool.submit(self._finish_waiting)

    def _finish_waiting(self) -> None:
        with self._lock:
            if not self._plans:  # an earlier call took this one's plan along with its own
                return
        self._wait_for_lull()
        with self._lock:
            plans = [self._plans.popleft() for _ in range(min(FINISH_BATCH, len(self._plans)))]
        more = f" and {len(plans) - 1} more" if len(plans) > 1 else ""
        run_guarded(log, f"github: intake of {plans[0].issue}{more}", finish_github_plans, self.pacer, plans)

    def _wait_for_lull(self) -> None:
        deadline = time.monotonic() + MAX_YIELD_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                busy = self._in_flight > 0 or time.monotonic() - self._last_delivery < LULL_SECONDS
            if not busy:
                return
            time.sleep(LULL_SECONDS / 5)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait for the follow-up work submitted so far; True when all of it finished in time."""
        return self._pool.drain(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Finish what was answered (GitHub will not send it again), then stop the threads."""
        self._recorder.shutdown(wait=True)
        self.drain(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)


def decode(body: bytes, content_type: str) -> tuple[dict[str, Any] | None, str]:
    """The payload as a dict, or None and what is wrong with it. JSON, or the form encoding a hook
    can be set to (`payload=<json>`)."""
    raw: bytes | str = body
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=False)
        except UnicodeDecodeError:
            return None, error_text("github_webhook/form_not_utf8")
        if "payload" not in fields:
            return None, error_text("github_webhook/form_without_payload")
        raw = fields["payload"][0]
    try:
        payload = json.loads(raw)
    except RecursionError:
        return None, error_text("github_webhook/nested_too_deep")
    except ValueError as exc:
        return None, error_text("github_webhook/not_json", detail=str(exc)[:200])
    if not isinstance(payload, dict):
        return None, error_text(
            "github_webhook/not_an_object", kind=_JSON_KINDS.get(type(payload), type(payload).__name__)
        )
    return payload, ""


_JSON_KINDS = {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def register(app: FastAPI, pacer: Pacer) -> GithubEdge:
    """Mount POST /github/webhook. Without GITHUB_WEBHOOK_SECRET the route answers 503 and why."""
    edge = GithubEdge(pacer)
    limit: int = pacer.settings.max_body_bytes

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(edge.close)

    async def github_webhook(request: Request) -> Response:
        if not edge.secret:
            return Answer(503, "webhook_not_configured", error="not_configured").response()
        body = await read_bounded(request, limit)
        if body is None:
            return Answer(413, "webhook_too_large", {"limit": limit}, error="too_large").response()
        refusal = signature_refusal(edge.secret, request.headers.get("x-hub-signature-256"), body)
        if refusal is not None:
            log.info("github: delivery %s refused: %s", request.headers.get("x-github-delivery", "-"), refusal.template)
            return refusal.response()
        headers = {k.lower(): v for k, v in request.headers.items()}
        answer = await edge.record(headers, body)
        if answer.plan is not None and not answer.plan.is_empty:
            edge.finish(answer.plan)
        return answer.response()

    # A plain Starlette route: the endpoint reads the raw body itself, so FastAPI's request
    # handling (dependencies, body parsing, response validation) would be cost and nothing else.
    router = APIRouter(lifespan=lifespan)
    router.add_route(PATH, github_webhook, methods=["POST"], include_in_schema=False)
    router.add_route(PATH, not_a_delivery, methods=["GET", "HEAD", "PUT", "PATCH", "DELETE"], include_in_schema=False)
    app.include_router(router)
    app.state.github = edge
    return edge


async def not_a_delivery(_request: Request) -> Response:
    return Answer(
        405, "webhook_method", {"path": PATH}, error="method_not_allowed", headers={"Allow": "POST"}
    ).response()
