"""A fuzz of every HTTP door, on the production configuration: no input makes Pacer answer 5xx
or log an unhandled exception, and it answers /healthz afterwards.

One `pacer serve` as production builds it (`process.build`: the APScheduler deferrer on the
database, `wiring.install`, the echo runner, the real clock), with GitHub, Slack (against the
loopback mock of its Web API) and the REST API mounted, served by uvicorn on loopback, on a
SQLite file and on PostgreSQL. Hypothesis sends it, derandomized so CI sees the same inputs:

    GitHub     signed deliveries: the vendored examples and Pacer's own shapes, mutated (values
               swapped for NUL, lone surrogates, huge or negative numbers, deep or wrong-typed
               JSON; keys dropped; the body cut or not UTF-8), with mutated event, delivery and
               hook headers and content types, now and then mis-signed
    Slack      signed message events, `/pacer` commands and block actions, mutated alike, bodies
               that are JSON but no object, and timestamp headers no clock can read
    /api/v1    authenticated calls to every route, with mutated bodies, path ids and actors
    /pacer     lines built from the grammar's own words and edge values (bot/commands/grammar),
               run as an operator through the API and through Slack, executed for real

After each example the edges' follow-up work is drained and the log is read: an ERROR record
(a traceback included) fails that example, so Hypothesis shrinks to the input that caused it.
Slack's `response_url` is never mutated: Slack signs it, and Pacer posts its answers there.

By hand: PACER_FUZZ_EXAMPLES=2000 sends that many examples to each door, and PACER_FUZZ_EXPLORE=1
draws new inputs on every run instead of CI's fixed ones.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from bot.commands.grammar import NAMES
from bot.config.rules import database_url
from bot.config.settings import load
from bot.github.webhook import signature
from bot.runtime import process
from bot.serve.app import create_app
from scheduler import bounds
from templates import render_chat
from tests.conftest import _fresh_postgres, _postgres_url
from tests.support.api_client import Server
from tests.support.github_support import FIXTURES, issue_payload
from tests.support.slack_mock import (
    BOT_TOKEN,
    SIGNING_SECRET,
    MockSlack,
    action_body,
    event_body,
    sign,
)

TOKEN = "fuzz-token-0123456789"
GITHUB_SECRET = "fuzz-github-secret"
ROSTER = "alice=operator,bob=member,UOPS=operator,UMEM=member"
PERSONAL = {
    "alice": "alice-fuzz-token-0123456789",
    "bob": "bob-fuzz-token-0123456789",
    "UOPS": "uops-fuzz-token-0123456789",
}
FUZZ = settings(
    derandomize=not os.environ.get("PACER_FUZZ_EXPLORE"),
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
EXAMPLES = {"github": 150, "slack": 200, "pacer": 150, "api": 250}
if os.environ.get("PACER_FUZZ_EXAMPLES"):
    EXAMPLES = dict.fromkeys(EXAMPLES, int(os.environ["PACER_FUZZ_EXAMPLES"]))


class LogWatch(logging.Handler):
    """Every record at ERROR or above, from Pacer, its libraries and uvicorn."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def since(self, mark: int) -> list[str]:
        return [f"{r.name}: {r.getMessage()}\n{self.format(r) if r.exc_info else ''}" for r in self.records[mark:]]


class Served:
    """The app under test and what the checks read. Not a dataclass: Hypothesis would print its
    every field with a failing example."""

    def __init__(self, http: httpx.Client, pacer: Any, app: Any, mock: MockSlack, log: LogWatch) -> None:
        self.http, self.pacer, self.app, self.mock, self.log = http, pacer, app, mock, log

    def __repr__(self) -> str:
        return f"Served({self.pacer.settings.database_url.split(':')[0]})"

    def settle(self) -> None:
        """Wait for the work each edge does after its answer."""
        assert self.app.state.slack.edge.drain(10)
        assert self.app.state.github.drain(10)

    def check(self, response: httpx.Response, allowed: set[int], mark: int, what: str) -> None:
        event(f"HTTP {response.status_code}")  # the spread shows with --hypothesis-show-statistics
        self.settle()
        assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
        assert response.status_code in allowed, f"{what}: {response.status_code} {response.text[:300]}"
        errors = self.log.since(mark)
        assert not errors, f"{what}: logged\n" + "\n".join(errors)


def _environ(database_url: str, mock: MockSlack, workdir: Path) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url, "PACER_API_TOKEN": TOKEN, "PACER_ROSTER": ROSTER, "PACER_API_ROLE": "operator",
        "PACER_API_TOKENS": ",".join(f"{name}={token}" for name, token in PERSONAL.items()),
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": mock.api_url, "PACER_OPS_CHANNEL": "C0OPS", "PACER_MAX_BODY_BYTES": "65536",
        "PACER_ECHO_SECONDS": "0.02", "PACER_WORKDIR": str(workdir), "PACER_MAX_SESSIONS": "4",
    }


def _seed(http: httpx.Client) -> None:
    """Triggers for every kind of intake, so deliveries reach the deep end: sessions, turns."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for body in (
        {
            "name": "issues",
            "kind": "github_issue",
            "prompt_template": "Fix {{ repository }}#{{ number }}: {{ title }}\n{{ body }}",
        },
        {"name": "labels", "kind": "github_label", "prompt_template": "{{ text }}", "config": {"label": "bug"}},
        {
            "name": "channel",
            "kind": "slack",
            "prompt_template": "From {{ user }}: {{ text }}",
            "config": {"channels": ["C0WORK"]},
        },
        {
            "name": "watch",
            "kind": "ao_event",
            "prompt_template": "{{ text }}",
            "config": {"filter": {"genesis": "slack"}, "states": ["done"]},
        },
    ):
        assert http.post("/api/v1/triggers", json=body, headers=auth).status_code == 201
    for prompt in ("first", "second", "third"):
        assert http.post("/api/v1/sessions", json={"prompt": prompt}, headers=auth).status_code == 201


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp}/pacer.db"
    else:
        raw = _postgres_url()
        if not raw:
            pytest.skip("PostgreSQL not configured (set PACER_TEST_DATABASE_URL)")
        engine = _fresh_postgres()
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS apscheduler_jobs"))
        url = database_url("PACER_TEST_DATABASE_URL", raw)
    mock = MockSlack().start()
    pacer = process.build(load(_environ(url, mock, tmp / "work"), toml_path=None))
    app = create_app(pacer)
    server = Server(app, lifespan="on").start()
    watch = LogWatch()
    watched = [logging.getLogger(), logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")]
    for logger in watched:  # after uvicorn configured its loggers: "uvicorn" does not propagate
        logger.addHandler(watch)
    http = httpx.Client(base_url=server.url, timeout=30)
    try:
        _seed(http)
        yield Served(http, pacer, app, mock, watch)
    finally:
        http.close()
        server.stop()
        for logger in watched:
            logger.removeHandler(watch)
        mock.stop()
        pacer.engine.dispose()
        if request.param == "postgres":
            with _fresh_postgres().begin() as conn:
                conn.execute(text("DROP TABLE IF EXISTS apscheduler_jobs"))


# --------------------------------------------------------------------------- values and mutations

# Repository names past the rule (`bounds.REPOSITORY_PATTERN`) and at its edges: a path out of the
# mirrors, an owner GitHub would not give, a name ending in .git, two spellings of one, the longest.
REPOSITORY_NAMES = ["-u/x", "../..", "a/..", ".git/x", "_x/y", "a/.hidden", "a/.git", "a/x.git", "ACME/API", "acme/api",
                    "o" * 39 + "/" + "n" * 100, "o" * 40 + "/x", "a/" + "n" * 101]
NASTY_TEXT = [*REPOSITORY_NAMES,
    "", " ", "\t\n ", "\x00", "a\x00b", "\ud800", "x\udfff", "\ud83d\ude00", "\x1b[31m", "\u202e", "é", "😀",
    "{{ 7*7 }}", "{% raw %}", "<@U0>", "&lt;", "' OR 1=1 --", "%s%n", "#1", "owner/repo#2", "depends on #1",
    "pacer:priority", "pacer:hold", "bug", "a" * 300,
]
NASTY_INTS = [0, -1, 1, 2, 3, 7, bounds.MAX_ID, bounds.MAX_ID + 1, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**40,
              bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE + 1, bounds.MAX_SESSIONS, bounds.MAX_SESSIONS + 1]
NASTY_FLOATS = [0.0, -0.0, 0.5, -1.5, 1e308, float("inf"), float("-inf"), float("nan")]

texts = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=20))
scalars = st.one_of(
    texts, st.sampled_from(NASTY_INTS), st.integers(-100, 100), st.sampled_from(NASTY_FLOATS), st.booleans(), st.none()
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=6
)


def _deep(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


special_values = st.sampled_from([[], {}, "", None, _deep(bounds.MAX_DEPTH + 2), [[[[[[[[[[[]]]]]]]]]]]])
values = st.one_of(json_values, special_values).map(copy.deepcopy)  # a mutation may add to it in place


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(doc, dict):
        for key, child in doc.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(doc, list):
        for index, child in enumerate(doc):
            found += _paths(child, (*prefix, index))
    return found


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _drop(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return doc
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return doc


def mutated(draw: st.DrawFn, base: Any, *, keep: frozenset[str] = frozenset()) -> Any:
    """`base` with one to three of its values swapped for a nasty one, dropped, or added to."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if not keep.intersection(str(k) for k in p)]
        path = draw(st.sampled_from(paths))
        operation = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if operation == "replace":
            doc = _replace(doc, path, draw(values))
        elif operation == "drop":
            doc = _drop(doc, path)
        else:
            target = doc
            for key in path:
                target = target[key]
            if isinstance(target, dict):
                target[draw(texts)] = draw(values)
            elif isinstance(target, list):
                target.append(draw(values))
    return doc


@st.composite
def encoded(draw: st.DrawFn, doc: Any) -> bytes:
    """JSON as a sender might write it: ASCII-escaped or raw UTF-8 (lone surrogates passed through
    as the bytes no decoder takes), now and then cut short or with a stray byte."""
    body = json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none"] * 8 + ["cut", "byte"]))
    if damage == "cut" and body:
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif damage == "byte":
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\x00", b"\xc3", b"\\", b'"'])) + body[at:]
    return body


# What HTTP lets a header carry (h11 refuses the rest before Pacer sees it): visible ASCII and
# Latin-1, inner spaces.
header_texts = st.one_of(
    st.sampled_from(["", "issues", "x" * 300, "é", "\u00b2", "../..", "1 OR 1"]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=20),
)


# --------------------------------------------------------------------------- GitHub


def _examples() -> list[tuple[str, Any]]:
    found = [(path.parent.name, json.loads(path.read_text())) for path in sorted(FIXTURES.glob("*/*.json"))]
    own = [
        ("issues", issue_payload()),
        ("issues", issue_payload("labeled", label="bug", labels=("bug",))),
        ("issues", issue_payload("labeled", label="pacer:priority", labels=("pacer:priority",))),
        ("issues", issue_payload("labeled", label="pacer:hold", labels=("pacer:hold",))),
        ("issues", issue_payload("unlabeled", label="pacer:hold")),
        ("issues", issue_payload("closed")),
        ("issues", issue_payload("reopened")),
        ("pull_request", issue_payload("labeled", label="bug", pull_request=True)),
        ("issues", issue_payload(body="depends on #1, #2 and acme/api#3\n@#4")),
        *[("issues", issue_payload(repository=name, number=n)) for n, name in enumerate(REPOSITORY_NAMES, start=1)],
        *[
            ("issues", issue_payload("labeled", label="bug", labels=("bug",), repository=name))
            for name in REPOSITORY_NAMES
        ],
    ]
    return found + own


GITHUB_EXAMPLES = _examples()


@st.composite
def github_deliveries(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    event, base = draw(st.sampled_from(GITHUB_EXAMPLES))
    doc = mutated(draw, base) if draw(st.integers(0, 4)) else base
    body = draw(encoded(doc))
    content_type = draw(
        st.sampled_from(["application/json"] * 4 + ["application/x-www-form-urlencoded", "text/plain", ""])
    )
    if content_type == "application/x-www-form-urlencoded":
        body = urlencode({"payload": body.decode("utf-8", "replace")}).encode()
    headers: dict[str, Any] = {
        "Content-Type": content_type,
        "X-GitHub-Event": draw(
            st.one_of(st.just(event), st.sampled_from(["issues", "pull_request", "ping", "push"]), header_texts)
        ),
        "X-GitHub-Delivery": draw(st.one_of(st.uuids().map(str), st.sampled_from(["guid-1", "guid-2"]), header_texts)),
        "X-GitHub-Hook-ID": draw(st.one_of(st.sampled_from(["1", "2"]), header_texts)),
        "X-Hub-Signature-256": signature(GITHUB_SECRET.encode(), body),
    }
    if not draw(st.integers(0, 9)):
        headers["X-Hub-Signature-256"] = draw(st.sampled_from(["", "sha256=00", signature(b"wrong", body), "sha1=ab"]))
    return body, {k: v.encode("latin-1") for k, v in headers.items()}


@settings(FUZZ, max_examples=EXAMPLES["github"])
@given(delivery=github_deliveries())
def test_github_deliveries_are_never_a_5xx(served: Served, delivery: tuple[bytes, dict[str, Any]]) -> None:
    body, headers = delivery
    mark = len(served.log.records)
    response = served.http.post("/github/webhook", content=body, headers=headers)
    served.check(
        response, {200, 202, 400, 401, 413}, mark, f"GitHub {headers[b'X-GitHub-Event'.decode()]!r} {body[:200]!r}"
    )


@pytest.mark.parametrize("name", REPOSITORY_NAMES, ids=lambda name: name[:12])
def test_github_deliveries_naming_each_repository_are_never_a_5xx(served: Served, name: str) -> None:
    # Each name once, unmutated and signed, as the draws above may not reach them all.
    for number, payload in enumerate(
        [issue_payload(repository=name, number=7000), issue_payload("labeled", label="bug", repository=name)]
    ):
        body = json.dumps(payload).encode()
        sent = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": f"repo-{number}-{name}"[:100],
            "X-GitHub-Hook-ID": "1",
            "X-Hub-Signature-256": signature(GITHUB_SECRET.encode(), body),
        }
        mark = len(served.log.records)
        response = served.http.post("/github/webhook", content=body, headers=sent)
        served.settle()
        assert response.status_code == (202 if bounds.is_repository(name) else 200), response.text
        assert not served.log.since(mark), served.log.since(mark)


# --------------------------------------------------------------------------- the /pacer grammar

GRAMMAR_WORDS = [
    "top", "above", "below", "between", "until", "queue", "for", "set", "class", "precedence", "--spot", "--x", "all",
    "priority", "spot", "default", "genesis:slack", "genesis:x", "trigger:#1", "trigger:0", "repo:acme/web", "repo:..",
    *[f"repo:{name}" for name in REPOSITORY_NAMES],
    "label:bug", "label:", "class:spot", "class:x", "gating=off", "gating=maybe", "preemption=on", "reserve_5h=10",
    "reserve_7d=101", "reserve_5h=nan", "max_sessions=3", "max_sessions=0", f"max_sessions={2**63}",
    f"max_sessions={bounds.MAX_SESSIONS + 1}", "override:api=priority", "override:slack=spot", "override:x=spot", "x=y",
    "2h", "0m", "999d", "1h30m", "15:30", "25:99", "2026-11-03T08:00Z", "2026-13-45", "2026-11-03", "08:00", "-5",
    f"{bounds.MAX_PRECEDENCE}", f"{bounds.MAX_PRECEDENCE + 1}", f"-{bounds.MAX_PRECEDENCE + 1}", "1e9", "+7",
]
ID_WORDS = [
    "1",
    "#1",
    "2",
    "3",
    "#4",
    "9",
    "0",
    "-1",
    str(bounds.MAX_ID),
    str(bounds.MAX_ID + 1),
    str(2**63),
    "9" * 30,
    "#",
    "#x",
    "١",
]
FREE_WORDS = ["fix", "the", "tests", "\x00", "\ud800", "\x07", "\u00a0", "é", "😀", "{{ x }}", "*bold*", "<!channel>"]

words = st.one_of(
    st.sampled_from(GRAMMAR_WORDS), st.sampled_from(ID_WORDS), st.sampled_from(FREE_WORDS), st.text(max_size=8)
)


@st.composite
def pacer_lines(draw: st.DrawFn) -> str:
    verb = draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(["/pacer", "HELP", "Queue", "nonsense", ""])))
    line = " ".join([verb, *draw(st.lists(words, max_size=5))])
    return line if draw(st.integers(0, 19)) else line + " " + "x" * draw(st.sampled_from([3990, 4001]))


# A slash command as Slack posts it, but for the text, the user and the response_url.
COMMAND_FIELDS = {
    "token": "legacy-unused", "team_id": "T0PACER", "channel_id": "C0WORK", "channel_name": "work", "user_id": "UOPS",
    "user_name": "ops", "command": "/pacer", "api_app_id": "A0PACER", "trigger_id": "1.2.3",
}


def _command_form(fields: dict[str, str]) -> bytes:
    """Form-encoded as Slack sends it; a lone surrogate goes out as the bytes it stands for."""
    return urlencode(fields, encoding="utf-8", errors="surrogatepass").encode()


COMMAND_FAILED = {render_chat("command_failed", "text"), render_chat("command_failed", "slack")}


@settings(FUZZ, max_examples=EXAMPLES["pacer"])
@given(line=pacer_lines(), surface=st.sampled_from(["api", "slack"]))
def test_pacer_commands_on_every_surface_are_never_a_5xx(served: Served, line: str, surface: str) -> None:
    mark = len(served.log.records)
    if surface == "api":
        headers = {
            "Authorization": f"Bearer {PERSONAL['alice']}",
            "X-Pacer-Actor": "alice",
            "Content-Type": "application/json",
        }
        response = served.http.post("/api/v1/chat", content=json.dumps({"text": line}).encode(), headers=headers)
        served.check(response, {200, 422}, mark, f"/api/v1/chat {line[:200]!r}")
        if response.status_code == 200:
            assert response.json()["text"] not in COMMAND_FAILED, line
        return
    body = _command_form({**COMMAND_FIELDS, "text": line, "response_url": served.mock.response_url("fuzz")})
    response = served.http.post(
        "/slack/events", content=body, headers=_slack_headers(body, "application/x-www-form-urlencoded")
    )
    served.check(response, {200, 413}, mark, f"/pacer {line[:200]!r}")


# --------------------------------------------------------------------------- Slack


def _slack_headers(body: bytes, content_type: str, timestamp: Any = None) -> dict[str, Any]:
    now = int(time.time())
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(now) if timestamp is None else timestamp,
        "X-Slack-Signature": sign(SIGNING_SECRET, body, now),
    }


MESSAGES = [
    {
        "type": "message",
        "channel": "C0WORK",
        "channel_type": "channel",
        "user": "UMEM",
        "text": "please fix the build",
        "ts": "1790000000.000100",
    },
    {
        "type": "message",
        "channel": "D0DM",
        "channel_type": "im",
        "user": "UOPS",
        "text": "run the nightly",
        "ts": "1790000001.000100",
    },
    {
        "type": "message",
        "channel": "D0DM",
        "channel_type": "im",
        "user": "USTRANGER",
        "text": "let me in",
        "ts": "1790000002.000100",
    },
    {
        "type": "message",
        "channel": "D0DM",
        "channel_type": "im",
        "user": "UOPS",
        "text": "also the docs",
        "ts": "1790000003.000100",
        "thread_ts": "1790000001.000100",
    },
    {"type": "app_home_opened", "user": "UOPS", "tab": "home", "channel": "D0DM"},
]
RESPONSE_URL = "{response_url}"  # the mock's, filled in when sent: Slack signs it, so it is never mutated
ACTIONS = [
    {"action_id": "pacer.queue_row", "selected_option": {"value": "promote:1"}},
    {"action_id": "pacer.queue_row", "selected_option": {"value": "archive:2"}},
    {"action_id": "pacer.hold_release", "value": "1"},
    {"action_id": "pacer.queue_resume", "value": "resume"},
    {"action_id": "pacer.session_priority", "value": "3"},
]


def _action_payload(action: dict[str, Any], response_url: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": "UOPS", "username": "ops"},
        "team": {"id": "T0PACER"},
        "api_app_id": "A0PACER",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "channel_id": "C0WORK"},
        "channel": {"id": "C0WORK"},
        "response_url": response_url,
        "actions": [dict(action, block_id="b", type="button")],
    }


@st.composite
def slack_requests(draw: st.DrawFn) -> tuple[bytes, dict[str, Any], str]:
    kind = draw(st.sampled_from(["event", "event", "command", "action", "action", "raw"]))
    if kind == "event":
        envelope = json.loads(
            event_body(draw(st.sampled_from(MESSAGES)), event_id=draw(st.sampled_from(["Ev1", "Ev2", "Ev3"])))
        )
        envelope["event_id"] = draw(st.one_of(st.sampled_from(["Ev1", "Ev2", "Ev3", "Ev4"]), st.uuids().map(str)))
        body = draw(encoded(mutated(draw, envelope) if draw(st.integers(0, 5)) else envelope))
        content_type = draw(
            st.sampled_from(["application/json"] * 5 + ["application/json; charset=utf-8", "text/plain"])
        )
    elif kind == "command":
        fields = {
            **COMMAND_FIELDS,
            "user_id": draw(st.sampled_from(["UOPS", "UMEM", "USTRANGER"])),
            "text": draw(st.one_of(pacer_lines(), texts)),
        }
        for key in draw(st.lists(st.sampled_from(sorted(fields)), max_size=2)):
            fields[key] = draw(texts)
        body = _command_form({**fields, "response_url": RESPONSE_URL})
        content_type = "application/x-www-form-urlencoded"
    elif kind == "action":
        payload = _action_payload(draw(st.sampled_from(ACTIONS)), RESPONSE_URL)
        payload = mutated(draw, payload, keep=frozenset({"response_url"})) if draw(st.integers(0, 5)) else payload
        body = action_body(payload if isinstance(payload, dict) else {"payload": payload}).encode()
        content_type = "application/x-www-form-urlencoded"
    else:
        body = draw(
            st.sampled_from(
                [
                    b"[]",
                    b'"x"',
                    b"1",
                    b"null",
                    b"[" * 3000 + b"]" * 3000,
                    b"payload=%5B%5D",
                    b"payload=" + b"%5B" * 3000,
                    b"\xff\xfe",
                    b"",
                    b"{}",
                    b'{"type": "event_callback", "event": []}',
                    b'{"type": "event_callback", "event": {"type": "message"}, "authorizations": "x"}',
                    b'{"type": "url_verification", "challenge": {"a": 1}}',
                ]
            )
        )
        content_type = draw(st.sampled_from(["application/json", "application/x-www-form-urlencoded"]))
    timestamp = (
        None if draw(st.integers(0, 11)) else draw(st.sampled_from(["9" * 400, "\u00b2", "1\u00b9", "0", "-1", "x"]))
    )
    return body, {"Content-Type": content_type, "timestamp": timestamp}, kind


@settings(FUZZ, max_examples=EXAMPLES["slack"])
@given(request_=slack_requests())
def test_slack_deliveries_are_never_a_5xx(served: Served, request_: tuple[bytes, dict[str, Any], str]) -> None:
    body, meta, kind = request_
    body = body.replace(
        quote(RESPONSE_URL, safe="").encode(), quote(served.mock.response_url("fuzz"), safe="").encode()
    )
    headers = _slack_headers(body, meta["Content-Type"])
    if meta["timestamp"] is not None:
        headers["X-Slack-Request-Timestamp"] = meta["timestamp"].encode("latin-1")
    mark = len(served.log.records)
    response = served.http.post("/slack/events", content=body, headers=headers)
    served.check(response, {200, 400, 401, 404, 413}, mark, f"Slack {kind} {body[:300]!r}")


# --------------------------------------------------------------------------- /api/v1

TRIGGER_BODIES = [
    {
        "name": "t-slack",
        "kind": "slack",
        "prompt_template": "{{ text }}",
        "config": {"channels": ["C0X"], "dms": False},
    },
    {
        "name": "t-issue",
        "kind": "github_issue",
        "prompt_template": "{{ title }}",
        "config": {"repositories": ["acme/api"], "labels": ["bug"]},
    },
    {
        "name": "t-label",
        "kind": "github_label",
        "prompt_template": "{{ text }}",
        "config": {"label": "pacer", "pull_requests": False},
    },
    {
        "name": "t-cron",
        "kind": "schedule",
        "prompt_template": "nightly at {{ fired_at }}",
        "config": {"cron": "0 3 * * *", "timezone": "UTC"},
    },
    {
        "name": "t-ao",
        "kind": "ao_event",
        "prompt_template": "{{ text }}",
        "config": {"session_id": 1, "states": ["done", "failed"]},
    },
]
ROUTES: list[tuple[str, str, Any]] = [
    (
        "POST",
        "/sessions",
        {
            "prompt": "do the work",
            "title": "t",
            "scheduling_class": "spot",
            "precedence": 5,
            "weight": 1.0,
            "capacity": 2,
            "concurrency_group": "g",
            "genesis": "api",
            "runtime": "echo",
        },
    ),
    ("POST", "/sessions", {"prompt": "child", "parent_session_id": 1}),
    ("POST", "/sessions", {"prompt": "top", "place": "top_of_spot", "forked_from": 2}),
    ("POST", "/sessions", {"prompt": "in a repository", "repository": "acme/api"}),
    ("GET", "/sessions?status=waiting,running&class=spot&order=precedence&limit=50", None),
    ("GET", "/sessions?genesis={text}&limit={int}", None),
    ("GET", "/sessions/{id}", None),
    ("PATCH", "/sessions/{id}", {"scheduling_class": "priority", "precedence": 3}),
    ("PATCH", "/sessions/{id}", {"place": "top_of_spot"}),
    ("POST", "/sessions/{id}/start_now", None),
    ("POST", "/sessions/{id}/archive", None),
    ("POST", "/sessions/{id}/messages", {"text": "and the docs"}),
    *[("POST", "/triggers", body) for body in TRIGGER_BODIES],
    ("GET", "/triggers?kind={text}", None),
    ("GET", "/triggers/{id}", None),
    (
        "PATCH",
        "/triggers/{id}",
        {"scheduling_class": "priority", "precedence": 7, "enabled": True, "concurrency_group": "g"},
    ),
    ("PATCH", "/triggers/{id}", {"config": {"channels": ["C0Y"]}, "prompt_template": "{{ text }}!"}),
    ("DELETE", "/triggers/{id}", None),
    (
        "POST",
        "/triggers/{id}/invoke",
        {"context": {"text": "go", "title": "t", "body": "b", "number": 1}, "title": "by hand"},
    ),
    ("GET", "/policy", None),
    (
        "PATCH",
        "/policy",
        {
            "max_sessions": 5,
            "reserve_5h_pct": 10,
            "reserve_7d_pct": 15.5,
            "gating_enabled": True,
            "preemption_enabled": True,
            "genesis_class_overrides": {"api": "priority", "command": None},
            "top_up_ceiling": 4,
            "top_up_stretch_minutes": 5,
            "top_up_cooldown_minutes": 20,
        },
    ),
    ("GET", "/holds", None),
    ("POST", "/chat", {"text": "queue all"}),
]
path_values = st.one_of(
    st.integers(1, 12).map(str),
    st.sampled_from([str(v) for v in NASTY_INTS] + ["abc", "1.5", "1e3", "%00", "%F0%9F", "-0", " 1"]),
)


@st.composite
def api_calls(draw: st.DrawFn) -> tuple[str, str, bytes | None, dict[str, str]]:
    method, template, base = draw(st.sampled_from(ROUTES))
    path = template.replace("{id}", draw(path_values)).replace("{int}", draw(path_values))
    path = path.replace("{text}", quote(draw(texts).encode("utf-8", "surrogatepass"), safe=""))
    body: bytes | None = None
    if base is not None:
        doc = mutated(draw, base) if draw(st.booleans()) else base
        body = draw(encoded(doc))
    elif draw(st.integers(0, 9)) == 0:
        body = draw(encoded(draw(json_values)))
    actor = draw(st.sampled_from([None, None, "alice", "bob", "mallory", "", "UOPS"]))
    # A person by their own token, mostly; now and then the shared token naming them (a 403).
    token = PERSONAL.get(actor or "", TOKEN) if draw(st.integers(0, 5)) else TOKEN
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": draw(st.sampled_from(["application/json"] * 6 + ["text/plain", ""])),
    }
    if actor is not None:
        headers["X-Pacer-Actor"] = actor
    # A retry's key, reused across bodies and callers, or past its rule (only POST /sessions reads it).
    key = draw(st.sampled_from([None, None, None, "k1", "k1", '"k1"', "k2", "", '"', "x" * 256, "a b", "a,b", "../.."]))
    if key is not None:
        headers["Idempotency-Key"] = key
    return method, "/api/v1" + path, body, headers


@settings(FUZZ, max_examples=EXAMPLES["api"])
@given(call=api_calls())
def test_api_calls_are_never_a_5xx(served: Served, call: tuple[str, str, bytes | None, dict[str, str]]) -> None:
    method, path, body, headers = call
    mark = len(served.log.records)
    response = served.http.request(method, path, content=body, headers=headers)
    served.check(response, {200, 201, 401, 403, 404, 409, 413, 422}, mark, f"{method} {path} {(body or b'')[:300]!r}")


# --------------------------------------------------------------------------- afterwards


def test_the_server_is_healthy_after_the_fuzz(served: Served) -> None:
    served.settle()
    deadline = time.monotonic() + 10
    while served.pacer.ctx.ports.workers.active() and time.monotonic() < deadline:  # the last echo turns
        time.sleep(0.05)
    health = served.http.get("/healthz")
    assert health.status_code == 200 and health.json() == {"ok": True}
    assert served.http.get("/api/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    errors = served.log.since(0)
    assert not errors, "\n".join(errors)

