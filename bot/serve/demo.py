"""`pacer serve --demo`: sample triggers, and a handful of sample events fed through the real
endpoints once the server is up, so a newcomer sees sessions arrive, queue, hold and run in the
log and in `pacer console`.

`install_demo(pacer)` — call it after `bot.runtime.process.build` and before the app starts:
  1. upserts three sample triggers: `demo-label-pacer` (github_label, label `pacer`),
     `demo-hourly-sweep` (schedule, every hour) and `demo-follow-up` (ao_event: when a
     `demo-label-pacer` session is done, a spot follow-up reviews it);
  2. without PACER_API_TOKEN, makes up a demo token for this run, and without
     GITHUB_WEBHOOK_SECRET a webhook secret (both logged, so you can curl);
  3. adds an `on_start` hook that, on a thread, waits for /healthz and then feeds:
     the policy narrowed to two slots (so holds show), signed GitHub `issues.labeled` deliveries
     (their sessions, once done, fire the follow-up), a priority request, spot work at three
     ranks and one placed at the top of the spot queue, and the schedule invoked by hand.
Every event goes over HTTP into the same routes production serves; nothing is written around them.
`own_database(settings, environ)` — called before `bot.runtime.process.build` — keeps all of it off
./var/pacer.db unless DATABASE_URL names a database.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import logging
import secrets
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bot.api.callers import DEMO_TOKEN_KEY
from bot.config.settings import Settings
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


@dataclass(frozen=True)
class Sent:
    what: str
    status: int
    summary: str


def own_database(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """`settings` with a database of the demo's own: DATABASE_URL when it is set (environment or
    pacer.toml), else a fresh SQLite file in a temporary directory removed at exit, so the demo's
    triggers (an hourly schedule among them), policy and sessions never land in ./var/pacer.db."""
    if "DATABASE_URL" in environ or settings.origin("DATABASE_URL") != "default":
        return settings
    folder = tempfile.mkdtemp(prefix="pacer-demo-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    url = f"sqlite:///{folder}/pacer.db"
    log.info("demo: on a database of its own, removed at exit; to watch it: DATABASE_URL=%s pacer console", url)
    return settings.replaced(DATABASE_URL=url)


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
    url = base_url or _base_url(pacer.settings)

    def start_feed(_pacer: Any) -> None:
        thread = threading.Thread(
            target=_run_feed, args=(url, token, secret, pace_seconds), name="pacer-demo", daemon=True
        )
        thread.start()

    pacer.extras.setdefault("on_start", []).append(start_feed)
    log.info(
        "demo: triggers %s installed; sample events follow once %s answers", ", ".join(t["name"] for t in TRIGGERS), url
    )


def _base_url(settings: Any) -> str:
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{host}:{settings.port}"


def _run_feed(url: str, token: str, secret: str | None, pace: float) -> None:
    try:
        if not wait_until_up(url):
            log.error("demo: %s did not answer /healthz within %.0f s; no sample events sent", url, HEALTH_WAIT_SECONDS)
            return
        feed(url, token, github_secret=secret, pace=pace)
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
            try:
                data = response.json()
            except ValueError:
                data = {}
            entry = Sent(what, response.status_code, _summary(data))
            sent.append(entry)
            report(entry)
            time.sleep(pace)
            return data if isinstance(data, dict) else {}

        record("PATCH /api/v1/policy max_sessions=2", client.patch("/api/v1/policy", json={"max_sessions": 2}))
        if github_secret:
            for number, title, body in ISSUES:
                raw = json.dumps(issue_delivery(number, title, body)).encode()
                signature = "sha256=" + hmac.new(github_secret.encode(), raw, hashlib.sha256).hexdigest()
                record(
                    f"POST /github/webhook issues.labeled #{number}",
                    client.post(
                        "/github/webhook",
                        content=raw,
                        headers={
                            "Content-Type": "application/json",
                            "X-GitHub-Event": "issues",
                            "X-GitHub-Delivery": str(uuid.uuid4()),
                            "X-GitHub-Hook-ID": "demo",
                            "X-Hub-Signature-256": signature,
                        },
                    ),
                )
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
