"""What the GitHub tests share: signed deliveries, the vendored example payloads, a Pacer runtime
in virtual time, and a small fake of GitHub's REST API on loopback.

The fake implements only what PyGithub calls for the sticky comment — get a repository, get an
issue, list its comments, create one, get one, edit one — and for a session's pull request —
list the open ones from a head branch, create one, edit one — and for labels (list, create), and
records every request, so a test can assert exactly which calls Pacer made.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from bot.github.webhook import signature
from tests.support.loopback import Backlogged

SECRET = "It's a Secret to Everybody"
FIXTURES = Path(__file__).parent / "fixtures" / "github"
_delivery_ids = itertools.count(1)
_comment_ids = itertools.count(5001)


def example_payloads() -> list[tuple[str, Path]]:
    """(event name, file) for every vendored octokit/webhooks example; the folder is the event."""
    return sorted((path.parent.name, path) for path in FIXTURES.glob("*/*.json"))


def headers(
    event: str, body: bytes, *, secret: str = SECRET, delivery: str | None = None, hook_id: str = "109948940"
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or f"72d3162e-cc78-11e3-81ab-{next(_delivery_ids):012d}",
        "X-GitHub-Hook-ID": hook_id,
        "X-Hub-Signature-256": signature(secret.encode(), body),
        "User-Agent": "GitHub-Hookshot/test",
    }


def issue_payload(
    action: str = "opened",
    *,
    number: int = 7,
    repository: str = "octo/app",
    author: str = "alice",
    association: str = "MEMBER",
    sender: str | None = None,
    sender_type: str = "User",
    labels: tuple[str, ...] = (),
    label: str | None = None,
    body: str = "Fix the thing.",
    title: str = "The thing is broken",
    pull_request: bool = False,
) -> dict[str, Any]:
    """A minimal issues / pull_request payload carrying the fields GitHub sends and Pacer reads."""
    item = {
        "number": number, "title": title, "body": body, "state": "open",
        "html_url": f"https://github.com/{repository}/{'pull' if pull_request else 'issues'}/{number}",
        "user": {"login": author, "type": "User"}, "author_association": association,
        "labels": [{"name": name} for name in labels],
    }
    payload: dict[str, Any] = {
        "action": action,
        "pull_request" if pull_request else "issue": item,
        "repository": {"full_name": repository, "name": repository.split("/")[1]},
        "sender": {"login": sender or author, "type": sender_type},
    }
    if label is not None:
        payload["label"] = {"name": label}
    return payload


def comment_payload(
    body: str, *, number: int = 7, repository: str = "octo/app", commenter: str = "alice", association: str = "MEMBER",
    pull_request: bool = False, sender_type: str = "User", comment_id: int | None = None,
) -> dict[str, Any]:
    """An `issue_comment.created` payload: a comment on an issue, or on a pull request's
    conversation. Each is a new comment (its own id) unless `comment_id` says which."""
    payload = issue_payload("created", number=number, repository=repository)
    if pull_request:
        payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{repository}/pulls/{number}"}
    payload["comment"] = {"id": comment_id or next(_comment_ids), "body": body,
                           "user": {"login": commenter, "type": sender_type}, "author_association": association}
    payload["sender"] = {"login": commenter, "type": sender_type}
    return payload


def make_pacer(engine: Any, clock: Any, deferrer: Any, **env: str) -> Any:
    """A Pacer runtime in virtual time with the production notifier chain and wiring."""
    from bot.config.settings import load
    from bot.runtime.notify import CompositeNotifier, LogNotifier
    from bot.runtime.process import Pacer
    from scheduler.testing import VirtualWorkers
    from tests.support.harness import context

    # The stand-in on loopback needs no spacing between writes (GitHub asks a second: the default).
    environ = {"GITHUB_WEBHOOK_SECRET": SECRET, "PACER_MAX_BODY_BYTES": "131072", "PACER_GITHUB_WRITE_SECONDS": "0"}
    settings = load(environ | env, toml_path=None)
    ctx = context(
        engine, clock, deferrer, VirtualWorkers(clock, deferrer), wired=True, notifier=CompositeNotifier(LogNotifier())
    )
    return Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` under a real uvicorn on a free loopback port, lifespan included; yields its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="pacer-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # a lifespan starting the scheduler, on a loaded machine
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)  # its lifespan's end (the scheduler, the leadership) is done before the next
        sock.close()


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any] | None
    at: float = field(default_factory=time.monotonic)  # when it arrived (the spacing of edits)


@dataclass
class FakeGithub:
    """GitHub's REST API, the calls of a sticky comment and of a pull request, on a free loopback port."""

    calls: list[Call] = field(default_factory=list)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {issue, body}
    pulls: dict[int, dict[str, Any]] = field(
        default_factory=dict
    )  # number -> {repository, head, base, title, body, draft}
    labels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repository -> [{name, color, description}]
    forbidden: set[str] = field(default_factory=set)  # repositories whose label writes answer 403
    # The catch-up's side (`bot.github.catch_up`): the App's webhook deliveries (oldest first),
    # each delivery's event and payload by guid, the redeliveries asked for (delivery ids), where
    # a redelivery is sent, the open issues by "owner/name#12", their events, the repositories.
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    payloads: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    redelivered: list[int] = field(default_factory=list)
    webhook_url: str | None = None
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    issue_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    repositories: list[str] = field(default_factory=lambda: ["octo/app"])
    installation_id: int = 4242
    now: Any = None  # () -> aware datetime stamping the deliveries (a test's clock); else the wall clock
    _sending: list[threading.Thread] = field(default_factory=list)
    # review id -> {repository, number, state, body, user, comments: [{path, line, body, user}]}
    reviews: dict[int, dict[str, Any]] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(9001))
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(100))
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeGithub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                return None

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_PATCH(self) -> None:
                fake._handle(self, "PATCH")

        self._server = Backlogged(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-github", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c.method in {"POST", "PATCH"}]

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path, _, query = handler.path.partition("?")
        self.calls.append(Call(method, path, body))
        routed = self._route(method, path, body, {k: v[0] for k, v in parse_qs(query).items()})
        status, answer = routed[0], routed[1]
        data = json.dumps(answer).encode()
        handler.send_response(status)
        for name, value in (routed[2] if len(routed) > 2 else {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str, body: dict[str, Any] | None, query: dict[str, str]) -> tuple[Any, ...]:
        base = self.url
        caught = self._catch_up_route(method, path, query)
        if caught is not None:
            return caught
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)", path):
            repo = m.group(1)
            return 200, {"id": 1, "name": repo.split("/")[1], "full_name": repo, "url": f"{base}/repos/{repo}",
                         "default_branch": "main", "owner": {"login": repo.split("/")[0]}}
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls", path):
            return self._pulls(method, m.group(1), body, query)
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/labels", path):
            return self._labels(method, m.group(1), body)
        if m := re.fullmatch(r"/users/([A-Za-z0-9-]+)", path):
            login = m.group(1)
            return 200, {"login": login, "id": 1000 + sum(map(ord, login)), "type": "User",
                         "url": f"{base}/users/{login}"}
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/reviews/(\d+)(/comments)?", path):
            review = self.reviews.get(int(m.group(3)))
            if review is None or (review["repository"], review["number"]) != (m.group(1), int(m.group(2))):
                return 404, {"message": "Not Found"}
            if m.group(4):
                return 200, [
                    {"id": 700 + i, "path": c["path"], "line": c["line"], "original_line": c["line"], "body": c["body"],
                     "user": {"login": c.get("user", review["user"])}, "pull_request_review_id": int(m.group(3))}
                    for i, c in enumerate(review["comments"])
                ]
            return 200, {"id": int(m.group(3)), "state": review["state"].upper(), "body": review["body"],
                         "user": {"login": review["user"]}}
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", path):
            number = int(m.group(2))
            if number not in self.pulls:
                return 404, {"message": "Not Found"}
            if method == "PATCH" and body is not None:
                self.pulls[number].update({k: body[k] for k in ("title", "body") if k in body})
            return 200, self._pull(number)
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)", path):
            repo, number = m.group(1), int(m.group(2))
            if f"{repo}#{number}" in self.issues:
                return 200, self.issues[f"{repo}#{number}"]
            return 200, {
                "id": number,
                "number": number,
                "title": "t",
                "state": "open",
                "url": f"{base}/repos/{repo}/issues/{number}",
            }
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", path):
            issue = f"{m.group(1)}#{m.group(2)}"
            if method == "POST" and body is not None:
                comment_id = next(self._ids)
                self.comments[comment_id] = {"issue": issue, "body": body["body"]}
                return 201, self._comment(m.group(1), comment_id)
            return 200, [self._comment(m.group(1), cid) for cid, c in self.comments.items() if c["issue"] == issue]
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", path):
            comment_id = int(m.group(2))
            if comment_id not in self.comments:
                return 404, {"message": "Not Found"}
            if method == "PATCH" and body is not None:
                self.comments[comment_id]["body"] = body["body"]
            return 200, self._comment(m.group(1), comment_id)
        return 404, {"message": f"the fake GitHub does not serve {method} {path}"}

    # The catch-up: deliveries, installations, labelled issues and their events.

    def label(self, repository: str, number: int, label: str, *, actor: str = "alice", author: str = "alice",
              association: str = "OWNER", delivered: bool = False, pull_request: bool = False) -> dict[str, Any]:
        """`actor` adds `label` to an open issue (made if new) while the fake records it; the
        delivery GitHub attempted is kept, failed unless `delivered`. Returns its payload."""
        key = f"{repository}#{number}"
        item = self.issues.setdefault(key, {
            "number": number, "title": f"Issue {number}", "body": "Fix the thing.", "state": "open",
            "html_url": f"https://github.com/{repository}/{'pull' if pull_request else 'issues'}/{number}",
            "user": {"login": author, "type": "User"}, "author_association": association, "labels": [],
            **({"pull_request": {"url": f"{self.url}/repos/{repository}/pulls/{number}"}} if pull_request else {}),
        })
        item["labels"].append({"name": label})
        self.issue_events.setdefault(key, []).append(
            {"event": "labeled", "actor": {"login": actor, "type": "User"}, "label": {"name": label}})
        payload = {"action": "labeled", "issue": dict(item), "label": {"name": label},
                   "repository": {"full_name": repository, "name": repository.split("/")[1]},
                   "sender": {"login": actor, "type": "User"}, "installation": {"id": self.installation_id}}
        self.attempt("issues", payload, ok=delivered)
        return payload

    def attempt(self, event: str, payload: dict[str, Any], *, ok: bool, guid: str | None = None) -> str:
        """Record one delivery attempt of `payload` (a new guid unless given), answered OK or not."""
        guid = guid or f"aaaa0000-0000-0000-0000-{next(_delivery_ids):012d}"
        self.payloads[guid] = (event, payload)
        at = (self.now() if self.now else datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.deliveries.append({
            "id": 700000 + len(self.deliveries), "guid": guid, "delivered_at": at,
            "redelivery": any(d["guid"] == guid for d in self.deliveries),
            "status": "OK" if ok else "Invalid HTTP Response: 503", "status_code": 202 if ok else 503,
            "event": event, "action": payload.get("action"), "installation_id": self.installation_id,
        })
        return guid

    def settle(self, timeout: float = 10.0) -> None:
        """Wait for the redeliveries under way to be answered."""
        for thread in list(self._sending):
            thread.join(timeout)

    def _redeliver(self, delivery_id: int) -> tuple[int, Any]:
        found = [d for d in self.deliveries if d["id"] == delivery_id]
        if not found:
            return 404, {"message": "Not Found"}
        guid = found[0]["guid"]

        def send() -> None:
            import httpx

            event, payload = self.payloads[guid]
            body = json.dumps(payload).encode()
            deadline = time.monotonic() + 10
            while self.webhook_url is None and time.monotonic() < deadline:  # a test names it once it serves
                time.sleep(0.01)
            try:
                answer = httpx.post(f"{self.webhook_url}/github/webhook", content=body, timeout=10,
                                    headers=headers(event, body, delivery=guid))
                ok = answer.status_code < 300
            except httpx.HTTPError:
                ok = False
            self.attempt(event, payload, ok=ok, guid=guid)

        thread = threading.Thread(target=send, name="fake-github-redeliver", daemon=True)
        self._sending.append(thread)  # before it is counted: `settle` after the count waits for it
        self.redelivered.append(delivery_id)
        thread.start()
        return 202, {}

    def _catch_up_route(self, method: str, path: str, query: dict[str, str]) -> tuple[Any, ...] | None:
        if path == "/app/hook/deliveries":  # newest first, by a cursor: the index to start from
            rows = list(reversed(self.deliveries))
            start, size = int(query.get("cursor", "0")), int(query.get("per_page", "30"))
            page = rows[start : start + size]
            more = {"Link": f'<{self.url}/app/hook/deliveries?cursor={start + size}&per_page={size}>; rel="next"'}
            return 200, page, more if start + size < len(rows) else {}
        if m := re.fullmatch(r"/app/hook/deliveries/(\d+)/attempts", path):
            return self._redeliver(int(m.group(1)))
        if path == "/app/installations":
            return 200, [{"id": self.installation_id, "account": {"login": "octo"}}]
        if re.fullmatch(r"/app/installations/\d+/access_tokens", path) and method == "POST":
            return 201, {"token": "ghs_installation", "expires_at": "2099-01-01T00:00:00Z"}
        if path == "/installation/repositories":
            return 200, {"total_count": len(self.repositories),
                         "repositories": [{"full_name": r} for r in self.repositories]}
        if path == "/user/repos":
            return 200, [{"full_name": r} for r in self.repositories]
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues", path):
            wanted = query.get("labels", "").lower()
            return 200, [i for k, i in self.issues.items() if k.startswith(f"{m.group(1)}#") and i["state"] == "open"
                         and any(label["name"].lower() == wanted for label in i["labels"])]
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/events", path):
            return 200, self.issue_events.get(f"{m.group(1)}#{m.group(2)}", [])
        return None

    def _pulls(self, method: str, repo: str, body: dict[str, Any] | None, query: dict[str, str]) -> tuple[int, Any]:
        if method == "POST" and body is not None:
            if any(p["repository"] == repo and p["head"] == body["head"] for p in self.pulls.values()):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"message": f"A pull request already exists for {body['head']}."}],
                }
            number = next(self._numbers)
            self.pulls[number] = {
                "repository": repo,
                **{k: body.get(k) for k in ("head", "base", "title", "body", "draft")},
            }
            return 201, self._pull(number)
        head = query.get("head", "")
        branch = head.partition(":")[2] or head
        found = [n for n, p in self.pulls.items() if p["repository"] == repo and (not branch or p["head"] == branch)]
        return 200, [self._pull(n) for n in found]

    def _labels(self, method: str, repo: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        present = self.labels.setdefault(repo, [])
        if method == "POST" and body is not None:
            if repo in self.forbidden:
                return 403, {"message": "Resource not accessible by integration"}
            if any(label["name"].lower() == body["name"].lower() for label in present):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}],
                }
            present.append({k: body.get(k) for k in ("name", "color", "description")})
            return 201, {"id": len(present), "url": f"{self.url}/repos/{repo}/labels/{body['name']}", **present[-1]}
        return 200, [
            {"id": n, "url": f"{self.url}/repos/{repo}/labels/{label['name']}", **label}
            for n, label in enumerate(present)
        ]

    def _pull(self, number: int) -> dict[str, Any]:
        pull = self.pulls[number]
        repo = pull["repository"]
        return {
            "id": number,
            "number": number,
            "state": "open",
            "title": pull["title"],
            "body": pull["body"],
            "draft": pull["draft"],
            "head": {"ref": pull["head"]},
            "base": {"ref": pull["base"]},
            "url": f"{self.url}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
        }

    def _comment(self, repo: str, comment_id: int) -> dict[str, Any]:
        return {"id": comment_id, "body": self.comments[comment_id]["body"], "user": {"login": "pacer[bot]"},
                "url": f"{self.url}/repos/{repo}/issues/comments/{comment_id}"}


@dataclass
class CommentHook:
    """Pacer's whole app on loopback, its webhook signed as GitHub signs it, answering `/pacer`
    comments into the fake: `send` a delivery (and wait for its work), read the `replies`."""

    client: Any
    app: Any
    fake: FakeGithub

    @property
    def ctx(self) -> Any:
        return self.app.state.pacer.ctx

    def send(self, event: str, payload: dict[str, Any]) -> Any:
        body = json.dumps(payload).encode()
        answer = self.client.post("/github/webhook", content=body, headers=headers(event, body))
        assert answer.status_code < 300, answer.text
        assert self.app.state.github.drain(10)
        return answer

    def issue_session(self) -> int:
        """A session from an issue opened by its owner (the github_issue trigger takes it)."""
        (session_id,) = self.send("issues", issue_payload(author="alice", association="OWNER")).json()["sessions"]
        return int(session_id)

    def command(self, text: str, *, commenter: str = "bob") -> str:
        """`/pacer <text>` commented by `commenter` (write access); the one reply it got."""
        before = len(self.replies())
        self.send("issue_comment", comment_payload(f"/pacer {text}", commenter=commenter, association="MEMBER"))
        replies = self.replies()
        assert len(replies) == before + 1, replies
        return replies[-1]

    def replies(self) -> list[str]:
        from integrations.github import markers

        return [c["body"] for c in self.fake.comments.values() if c["body"].startswith(markers.REPLY)]


@contextmanager
def comment_hook(engine: Any, clock: Any, deferrer: Any, **env: str) -> Iterator[CommentHook]:
    """A `CommentHook` with a github_issue trigger; `github:bob` is an operator unless `env` says."""
    import httpx

    from bot.serve.app import create_app
    from scheduler.store.db import session_scope
    from scheduler.store.models import Trigger

    fake = FakeGithub().start()
    env = {"GITHUB_TOKEN": "ghp_token", "GITHUB_API_URL": fake.url + "/", "PACER_ROSTER": "github:bob=operator", **env}
    pacer = make_pacer(engine, clock, deferrer, **env)
    with session_scope(engine) as db:
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
    app = create_app(pacer, start_scheduler=False)
    try:
        with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            yield CommentHook(client, app, fake)
    finally:
        fake.stop()


def check_payload(
    event: str = "check_run", *, sha: str = "a" * 40, conclusion: str = "failure", name: str = "tests",
    repository: str = "acme/api", branch: str = "pacer/1-record-every-turn", pull: int | None = 100,
    summary: str = "2 tests failed", text: str = "FAILED tests/test_login.py::test_expiry - AssertionError",
) -> dict[str, Any]:
    """A completed check_run, check_suite or workflow_run on `branch` at `sha`, for pull request `pull`."""
    pulls = [] if pull is None else [{"number": pull, "head": {"ref": branch, "sha": sha, "repo": {"id": 1}},
                                      "base": {"ref": "main", "repo": {"id": 1}}}]
    item: dict[str, Any] = {"id": 4242, "head_sha": sha, "status": "completed", "conclusion": conclusion,
                            "pull_requests": pulls, "html_url": f"https://github.com/{repository}/runs/4242"}
    if event == "check_run":
        item.update(name=name, check_suite={"id": 77, "head_branch": branch},
                    output={"title": f"{name}: {summary}", "summary": summary, "text": text})
    elif event == "check_suite":
        item.update(head_branch=branch, app={"name": "GitHub Actions"})
    else:
        item.update(name=name, head_branch=branch)
    return {"action": "completed", event: item, "repository": {"full_name": repository},
            "sender": {"login": "github-actions[bot]", "type": "Bot"}}


def review_payload(
    review_id: int, *, state: str = "changes_requested", body: str = "Please see my comments.", reviewer: str = "bob",
    association: str = "COLLABORATOR", number: int = 100, repository: str = "acme/api",
) -> dict[str, Any]:
    """A `pull_request_review.submitted` payload."""
    return {"action": "submitted", "pull_request": {"number": number},
            "review": {"id": review_id, "state": state, "body": body, "user": {"login": reviewer, "type": "User"},
                       "author_association": association},
            "repository": {"full_name": repository}, "sender": {"login": reviewer, "type": "User"}}


def review_comment_payload(
    review_id: int, *, path: str, line: int, body: str, reviewer: str = "bob", association: str = "COLLABORATOR",
    number: int = 100, repository: str = "acme/api",
) -> dict[str, Any]:
    """A `pull_request_review_comment.created` payload: one comment on a line, part of review `review_id`."""
    return {"action": "created", "pull_request": {"number": number},
            "comment": {"id": next(_comment_ids), "pull_request_review_id": review_id, "path": path, "line": line,
                        "body": body, "user": {"login": reviewer, "type": "User"}, "author_association": association},
            "repository": {"full_name": repository}, "sender": {"login": reviewer, "type": "User"}}
