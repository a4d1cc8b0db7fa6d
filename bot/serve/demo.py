"""`pacer serve --demo`: sample triggers, and a handful of sample events fed through the real
endpoints once the server is up, so a newcomer sees sessions arrive, queue, hold and run in the
log and in `pacer console`.

`install_demo(pacer)` — call it after `bot.runtime.process.build` and before the app starts:
  1. upserts three sample triggers: `demo-label-pacer` (github_label, label `pacer`),
     `demo-hourly-sweep` (schedule, every hour) and `demo-follow-up` (ao_event: when a
     `demo-label-pacer` session is done, a spot follow-up reviews it);
  2. without PACER_API_TOKEN, makes up a demo token for this run, and without
     GITHUB_WEBHOOK_SECRET a webhook secret (both logged, so you can curl);
  3. adds an `on_start` hook that, on a thread, waits for /healthz, says how to watch (the
     console command, as it can be pasted, and the live page's address with its token), then
     feeds: the policy narrowed to two slots (so holds show), signed GitHub `issues.labeled`
     deliveries (their sessions, once done, fire the follow-up), a priority request, spot work
     at three ranks and one placed at the top of the spot queue, and the schedule invoked by
     hand; then, for as long as the server runs, one more event every few seconds (`trickle`),
     so the log, the console and the live page always have something moving.
Every event goes over HTTP into the same routes production serves; nothing is written around them.
`own_database(settings, environ)` — called before `bot.runtime.process.build` — keeps all of it off
./var/pacer.db unless DATABASE_URL names a database, and removes its temporary database however
the server stops: at exit, and on SIGTERM and SIGHUP, which would otherwise end the process
without running anything at exit (uvicorn stops gracefully on SIGTERM, then raises it again).
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import itertools
import json
import logging
import secrets
import shlex
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import httpx

from bot.api.callers import DEMO_TOKEN_KEY
from bot.config.settings import Settings, redact_url
from bot.runtime.address import reachable_url
from bot.triggers import writes as store
from bot.triggers.spec import check_spec

log = logging.getLogger("pacer.demo")

LABEL = "pacer"
TRIGGERS: tuple[dict[str, Any], ...] = (
    {
        "name": "demo-label-pacer",
        "kind": "github_label",
        "config": {"label": LABEL},
        "prompt_template": "Work on {{ repository }}#{{ number }}: {{ title }}\n{{ url }}\n\n{{ body }}",
    },
    {
        "name": "demo-hourly-sweep",
        "kind": "schedule",
        "config": {"cron": "0 * * * *", "timezone": "UTC"},
        "prompt_template": "Find the flakiest test and fix it.\nThe hourly sweep, fired at {{ fired_at }}.",
    },
    {
        "name": "demo-follow-up",
        "kind": "ao_event",
        "config": {"filter": {"trigger": "demo-label-pacer"}, "states": ["done"]},
        "prompt_template": "Review what session #{{ session.id }} ({{ session.title }}) just finished:\n"
        "{{ session.output }}",
    },
)
ISSUES: tuple[tuple[int, str, str], ...] = (
    (101, "Login button does nothing on Safari", "Clicking Log in on Safari 17 has no effect."),
    (102, "Flaky test: test_checkout_total", "Fails one run in ten on CI."),
    (103, "Docs: the quickstart skips the migration step", "New users hit 'no such table'."),
)
HEALTH_WAIT_SECONDS = 30.0
TRICKLE_PACES = 3  # the trickle sends one event every this many paces (3 s at the default pace)
ENDING_SIGNALS = ("SIGTERM", "SIGHUP")  # what ends a process without atexit, by default


@dataclass(frozen=True)
class Sent:
    what: str
    status: int
    summary: str


def own_database(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """`settings` with a database of the demo's own (`demo_database`), its folder removed however
    this process ends (`remove_at_every_exit`)."""
    settings, folder = demo_database(settings, environ)
    if folder is not None:
        remove_at_every_exit(folder)
        log.info("demo: on a database of its own, removed when the demo stops: %s", settings.database_url)
    return settings


def demo_database(settings: Settings, environ: Mapping[str, str]) -> tuple[Settings, str | None]:
    """DATABASE_URL when it is set (environment or pacer.toml), else a fresh SQLite file in a new
    temporary folder (returned with it), so the demo's triggers (an hourly schedule among them),
    policy and sessions never land in ./var/pacer.db."""
    if "DATABASE_URL" in environ or settings.origin("DATABASE_URL") != "default":
        return settings, None
    folder = tempfile.mkdtemp(prefix="pacer-demo-")
    return settings.replaced(DATABASE_URL=f"sqlite:///{folder}/pacer.db"), folder


def remove_at_every_exit(folder: str) -> None:
    """Remove `folder` at exit, on a normal end and on Ctrl-C (KeyboardInterrupt), and on SIGTERM
    and SIGHUP, whose default ends the process without exit handlers: the handler removes it,
    then lets the signal end the process as it would have (uvicorn, having stopped gracefully on
    SIGTERM, raises it again into this handler)."""

    def remove() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    def end(number: int, _frame: FrameType | None) -> None:
        remove()
        signal.signal(number, signal.SIG_DFL)
        signal.raise_signal(number)

    atexit.register(remove)
    for name in ENDING_SIGNALS:
        number = getattr(signal, name, None)  # Windows has no SIGHUP
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, end)


def install_demo(pacer: Any, *, base_url: str | None = None, pace_seconds: float = 1.0) -> None:
    """Sample triggers now; the sample events once the server answers (see the module doc)."""
    with pacer.db() as db:
        for entry in TRIGGERS:
            store.upsert(db, check_spec(entry), now=pacer.clock.now())
    store.after_write(pacer.ctx, pacer.scheduler, pacer.engine)
    token = pacer.settings.api_token
    if not token:
        token = pacer.extras.setdefault(DEMO_TOKEN_KEY, secrets.token_urlsafe(18))
        log.warning("demo: PACER_API_TOKEN is unset, so this run's API token is %s (demo only)", token)
    if pacer.settings.origin("PACER_API_ROLE") == "default":
        # The feed sets the policy through the shared token, as an operator's automation would.
        pacer.settings = pacer.settings.replaced(PACER_API_ROLE="operator")
    secret = pacer.settings.github_webhook_secret
    if not secret:
        # So the label trigger (and the follow-up it leads to) fire through the real, signed
        # /github/webhook like a hook's deliveries; the edge reads the secret when the app is made.
        secret = secrets.token_hex(20)
        pacer.settings = pacer.settings.replaced(GITHUB_WEBHOOK_SECRET=secret)
        log.warning("demo: GITHUB_WEBHOOK_SECRET is unset, so this run's webhook secret is %s (demo only)", secret)
    url = base_url or reachable_url(pacer.settings.host, pacer.settings.port)
    watch = watching(url, pacer.settings.database_url, token, made=not pacer.settings.api_token)
    stop = threading.Event()

    def start_feed(_pacer: Any) -> None:
        thread = threading.Thread(
            target=_run_feed, args=(url, token, secret, pace_seconds, watch, stop), name="pacer-demo", daemon=True
        )
        thread.start()

    pacer.extras.setdefault("on_start", []).append(start_feed)
    pacer.extras.setdefault("on_stop", []).append(lambda _pacer: stop.set())
    log.info(
        "demo: triggers %s installed; sample events follow once %s answers", ", ".join(t["name"] for t in TRIGGERS), url
    )


def watching(url: str, database_url: str, token: str, *, made: bool) -> tuple[str, str]:
    """The console command that watches this demo, as it can be pasted into a shell, and the live
    page's address. The token is spelled out only when the demo made it up; a PACER_API_TOKEN of
    your own is the console's already, from the same environment or pacer.toml, and is never
    logged. A password in DATABASE_URL is shown as ***."""
    parts = [f"DATABASE_URL={shlex.quote(redact_url(database_url))}"]
    if made:
        parts.append(f"PACER_API_TOKEN={shlex.quote(token)}")
    console = " ".join([*parts, "pacer console"])
    live = f"{url}/?token={token if made else '<your PACER_API_TOKEN>'}"
    return console, live


def _run_feed(
    url: str, token: str, secret: str | None, pace: float, watch: tuple[str, str], stop: threading.Event
) -> None:
    try:
        if not wait_until_up(url):
            log.error("demo: %s did not answer /healthz within %.0f s; no sample events sent", url, HEALTH_WAIT_SECONDS)
            return
        log.info("demo: to watch it, in another terminal: %s", watch[0])
        log.info("demo: the live page: %s", watch[1])
        feed(url, token, github_secret=secret, pace=pace)
        trickle(url, token, github_secret=secret, every=pace * TRICKLE_PACES, stop=stop)
    except httpx.TransportError as exc:  # the server stopping mid-feed (Ctrl-C) is no error worth a traceback
        log.warning("demo: the sample feed stopped: the server went away (%s)", type(exc).__name__)
    except Exception:  # the demo's feed must never take the server down
        log.exception("demo: the sample feed stopped")


def wait_until_up(url: str, timeout: float = HEALTH_WAIT_SECONDS, *, alive: Callable[[], bool] = lambda: True) -> bool:
    """Whether `url`/healthz answers 200 within `timeout`; False at once when `alive()` says the
    server is gone (a process that exited will not come up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def issue_delivery(number: int, title: str, body: str, *, repository: str = "acme/demo") -> dict[str, Any]:
    """An `issues.labeled` payload in GitHub's shape: the `pacer` label added by the author."""
    user = {"login": "octocat", "type": "User"}
    return {
        "action": "labeled",
        "label": {"name": LABEL},
        "issue": {
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "user": user,
            "html_url": f"https://github.com/{repository}/issues/{number}",
            "labels": [{"name": LABEL}],
            "author_association": "OWNER",
        },
        "repository": {
            "full_name": repository,
            "name": repository.split("/")[1],
            "owner": {"login": repository.split("/")[0]},
        },
        "sender": user,
    }


def feed(url: str, token: str, *, github_secret: str | None = None, pace: float = 0.0,
         say: Callable[[Sent], None] | None = None) -> list[Sent]:
    """Send the sample events to a running Pacer at `url`; returns what each answered."""
    sent: list[Sent] = []
    report = say or (lambda s: log.info("demo: %s -> %s %s", s.what, s.status, s.summary))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:

        def record(what: str, response: httpx.Response) -> dict[str, Any]:
            data = _json(response)
            entry = Sent(what, response.status_code, _summary(data))
            sent.append(entry)
            report(entry)
            time.sleep(pace)
            return data

        record("PATCH /api/v1/policy max_sessions=2", client.patch("/api/v1/policy", json={"max_sessions": 2}))
        if github_secret:
            for number, title, body in ISSUES:
                record(f"POST /github/webhook issues.labeled #{number}",
                       _deliver(client, github_secret, number, title, body))
        else:
            for number, title, body in ISSUES:
                record(f"POST /api/v1/sessions (issue #{number})", client.post("/api/v1/sessions", json={
                    "prompt": f"{title}\n\n{body}", "title": title}))
        record(
            "POST /api/v1/sessions priority",
            client.post(
                "/api/v1/sessions",
                json={
                    "prompt": "Answer the on-call question: why did last night's deploy roll back?",
                    "scheduling_class": "priority",
                },
            ),
        )
        for rank in (5, 50, 20):
            record(f"POST /api/v1/sessions spot precedence={rank}", client.post("/api/v1/sessions", json={
                "prompt": f"Background clean-up, rank {rank}: remove dead code in one module.", "precedence": rank}))
        record("POST /api/v1/sessions place=top_of_spot", client.post("/api/v1/sessions", json={
            "prompt": "Regenerate the API client before the others run.", "place": "top_of_spot"}))
        triggers = client.get("/api/v1/triggers", params={"kind": "schedule"}).json().get("triggers", [])
        sweep = next((t for t in triggers if t["name"] == "demo-hourly-sweep"), None)
        if sweep is not None:
            record(
                "POST /api/v1/triggers/{id}/invoke demo-hourly-sweep",
                client.post(
                    f"/api/v1/triggers/{sweep['id']}/invoke",
                    json={"context": {"fired_at": datetime.now(UTC).isoformat(timespec="seconds")}},
                ),
            )
        holds = record("GET /api/v1/holds", client.get("/api/v1/holds"))
        log.info("demo: %d sessions waiting on a hold; watch them start as slots free (pacer console, then `queue`)",
                 len(holds.get("sessions", [])))
    return sent


SPOT_CHORES = (
    "Remove dead code in one module.",
    "Bring one dependency up to date and run the tests.",
    "Add the missing type hints in one file.",
    "Turn one to-do comment left in the code into an issue or a fix.",
)
QUESTIONS = (
    "Why did the nightly build take twice as long?",
    "Which endpoint got slower this week, and why?",
    "What does the on-call runbook say about a full disk?",
)


def trickle(url: str, token: str, *, github_secret: str | None = None, every: float = 3.0,
            stop: threading.Event | None = None, say: Callable[[Sent], None] | None = None) -> list[Sent]:
    """One sample event every `every` seconds until `stop` is set (or the server goes away): a
    labelled issue, spot chores at varied ranks, a priority question, the schedule invoked by
    hand, in turn. Returns what each answered."""
    ending = stop or threading.Event()
    sent: list[Sent] = []
    report = say or (lambda s: log.info("demo: %s -> %s %s", s.what, s.status, s.summary))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        events = _events(client, github_secret)
        while not ending.is_set():
            what, response = next(events)
            entry = Sent(what, response.status_code, _summary(_json(response)))
            sent.append(entry)
            report(entry)
            ending.wait(every)
    return sent


def _events(client: httpx.Client, secret: str | None) -> Iterator[tuple[str, httpx.Response]]:
    """The trickle's events, without end."""
    for n in itertools.count():
        number = 104 + n
        if n % 5 == 0 and secret:
            title = f"{SPOT_CHORES[n % len(SPOT_CHORES)].rstrip('.')} (issue #{number})"
            delivered = _deliver(client, secret, number, title, "Labelled by the demo's trickle.")
            yield f"POST /github/webhook issues.labeled #{number}", delivered
        elif n % 5 == 2:
            question = QUESTIONS[n % len(QUESTIONS)]
            yield "POST /api/v1/sessions priority", client.post(
                "/api/v1/sessions", json={"prompt": question, "scheduling_class": "priority"})
        elif n % 5 == 4:
            triggers = _json(client.get("/api/v1/triggers", params={"kind": "schedule"})).get("triggers", [])
            sweep = next((t for t in triggers if t.get("name") == "demo-hourly-sweep"), None)
            if sweep is not None:
                yield "POST /api/v1/triggers/{id}/invoke demo-hourly-sweep", client.post(
                    f"/api/v1/triggers/{sweep['id']}/invoke",
                    json={"context": {"fired_at": datetime.now(UTC).isoformat(timespec="seconds")}})
        else:
            rank = (n * 37) % 100
            yield f"POST /api/v1/sessions spot precedence={rank}", client.post(
                "/api/v1/sessions", json={"prompt": SPOT_CHORES[n % len(SPOT_CHORES)], "precedence": rank})


def _deliver(client: httpx.Client, secret: str, number: int, title: str, body: str) -> httpx.Response:
    """A signed `issues.labeled` delivery to /github/webhook, as GitHub sends it."""
    raw = json.dumps(issue_delivery(number, title, body)).encode()
    signature = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return client.post("/github/webhook", content=raw, headers={
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "demo",
        "X-Hub-Signature-256": signature,
    })


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _summary(data: Any) -> str:
    if not isinstance(data, dict):
        return ""
    if "submission" in data and isinstance(data.get("session"), dict):
        sub, s = data["submission"], data["session"]
        held = f" ({sub.get('why')})" if sub.get("outcome") == "held" else ""
        return f"session #{s.get('id')} {s.get('genesis')}/{s.get('scheduling_class')} {sub.get('outcome')}{held}"
    if "audit" in data and "policy" in data:
        return str(data.get("audit") or "no change")
    if "sessions" in data and isinstance(data["sessions"], list) and "source" in data:
        return f"{len(data['sessions'])} held sessions"
    if "message" in data:
        return str(data["message"])
    return ""
