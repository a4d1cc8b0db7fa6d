"""Who the API speaks for: a personal token acts as its holder whatever X-Pacer-Actor says, the
shared token as "api token" with PACER_API_ROLE (member unless set), and no token is ever
logged, shown, or kept but as a hash. Real HTTP into the real app."""

from __future__ import annotations

import hashlib
import logging
import signal

import httpx
import pytest

from bot.config.settings import in_force, load
from scheduler.errors import ConfigError
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from tests.support.api_client import PERSONAL, PERSONAL_TOKENS, ROSTER, TOKEN, make_api
from tests.system.test_crash import TOKEN as SERVE_TOKEN
from tests.system.test_crash import _port, _serve

# The shared token with the default role: what a deployment gets unless it says otherwise.
pytestmark = pytest.mark.api(PACER_API_ROLE=None)


def as_token(api, method: str, path: str, token: str, actor: str | None = None, **kw):
    headers = {"Authorization": f"Bearer {token}", **({"X-Pacer-Actor": actor} if actor is not None else {})}
    return api.client.request(method, f"/api/v1{path}", headers=headers, **kw)


def test_a_personal_token_acts_as_its_holder_and_refuses_to_speak_for_another(api) -> None:
    bob = PERSONAL["bob"]
    made = as_token(api, "POST", "/sessions", bob, json={"prompt": "bob's work"})
    assert made.status_code == 201 and made.json()["session"]["requester"] == "bob"
    assert as_token(api, "POST", "/sessions", bob, actor="bob", json={"prompt": "named"}).status_code == 201
    refused = as_token(api, "POST", "/sessions", bob, actor="alice", json={"prompt": "as alice"})
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert refused.json()["message"] == (
        "X-Pacer-Actor: this token is bob's and speaks only for them, not for 'alice'; leave X-Pacer-Actor out or "
        "send alice's own token"
    )
    assert api.get("/sessions").json()["count"] == 2  # the refused call made nothing
    # Bob is a member whatever he names; alice, an operator, is audited as herself.
    assert as_token(api, "PATCH", "/policy", bob, json={"max_sessions": 5}).status_code == 403
    assert as_token(api, "PATCH", "/policy", PERSONAL["alice"], json={"max_sessions": 5}).status_code == 200
    assert "via api by alice: max_sessions 2 -> 5" in api.get("/policy").json()["audit"][0]


def test_the_shared_token_is_the_api_token_a_member_unless_set_and_a_blank_header_adds_no_reach(api) -> None:
    for header in (None, ""):  # absent or blank: the automation itself, never an operator
        refused = as_token(api, "PATCH", "/policy", TOKEN, actor=header, json={"max_sessions": 5})
        assert refused.status_code == 403, (header, refused.text)
        assert refused.json()["message"] == ("changing the policy needs the operator role; api token is a member "
                                             "(PACER_API_ROLE=operator gives the shared token that role)")
    own = as_token(api, "POST", "/sessions", TOKEN, json={"prompt": "automation's work"}).json()["session"]
    bobs = as_token(api, "POST", "/sessions", PERSONAL["bob"], json={"prompt": "bob's work"}).json()["session"]
    assert own["requester"] == "api token"
    assert as_token(api, "PATCH", f"/sessions/{own['id']}", TOKEN, json={"precedence": 9}).status_code == 200
    theirs = as_token(api, "PATCH", f"/sessions/{bobs['id']}", TOKEN, json={"precedence": 9})
    assert theirs.status_code == 403 and "requested by bob" in theirs.json()["message"]
    with session_scope(api.ctx.engine) as db:
        row = db.get(Session, own["id"])
        assert row is not None and row.source == {"surface": "api", "caller": "api token"}


def test_an_operator_automation_is_audited_as_the_api_token(engine, clock, request) -> None:
    api = make_api(engine, clock, PACER_API_ROLE="operator")
    request.addfinalizer(api.close)
    assert as_token(api, "PATCH", "/policy", TOKEN, json={"max_sessions": 4}).status_code == 200
    assert "via api by api token: max_sessions 2 -> 4" in api.get("/policy").json()["audit"][0]


def test_a_token_given_as_its_hash_works_as_the_token(engine, clock, request) -> None:
    token = "carols-own-token-kept-only-hashed"
    digest = hashlib.sha256(token.encode()).hexdigest()
    api = make_api(engine, clock, PACER_API_TOKENS=f"carol=sha256:{digest}")
    request.addfinalizer(api.close)
    made = as_token(api, "POST", "/sessions", token, json={"prompt": "carol's work"})
    assert made.status_code == 201 and made.json()["session"]["requester"] == "carol"
    assert as_token(api, "GET", "/sessions", f"sha256:{digest}").status_code == 401  # the hash is not a token


def test_no_token_is_logged_shown_or_kept_in_the_clear(api, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    for token in [*PERSONAL.values(), TOKEN, TOKEN + "x", PERSONAL["bob"][:-1]]:
        as_token(api, "GET", "/sessions", token)
        as_token(api, "POST", "/sessions", token, actor="mallory", json={"prompt": "x"})
    logged = "\n".join(record.getMessage() for record in caplog.records)
    settings = api.pacer.settings
    shown = {row.name: row.value for row in in_force(settings)}
    assert shown["PACER_API_TOKENS"] == "alice=***,bob=***,carol=***" and shown["PACER_API_TOKEN"] == "***"
    for token in [*PERSONAL.values(), TOKEN]:
        assert token not in logged and token not in repr(settings)
        assert token not in str(settings.api_tokens)  # only hashes in memory
    assert settings.replaced(PACER_API_ROLE="member").api_tokens == settings.api_tokens  # re-validated from the hashes


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        (
            "bob=tiny1",
            "PACER_API_TOKENS: bob's token is shorter than 16 characters; make one with `openssl rand -hex 24`",
        ),
        ("=abcdefabcdefabcdef", "PACER_API_TOKENS: an entry must be NAME=TOKEN or NAME=sha256:<hex>, comma-separated"),
        ("bob=", "PACER_API_TOKENS: the entry for 'bob' must be NAME=TOKEN or NAME=sha256:<hex>, comma-separated"),
        ("bob=abcdefabcdefabcdef,bob=fedcbafedcbafedcba", "PACER_API_TOKENS: bob is given two tokens; keep one"),
        (
            "bob=abcdefabcdefabcdef,carol=abcdefabcdefabcdef",
            "PACER_API_TOKENS: carol and bob have the same token; a personal token speaks for one person",
        ),
        (
            "dave=abcdefabcdefabcdef",
            "PACER_API_TOKENS: 'dave' is not on the roster; add them to PACER_ROSTER (or [roster] in pacer.toml), or "
            "drop their token",
        ),
        (
            f"bob={TOKEN}",
            "PACER_API_TOKENS: bob's token is PACER_API_TOKEN, the shared one; give bob a token of their own",
        ),
    ],
)
def test_a_bad_personal_token_stops_start_up_naming_the_holder_never_the_token(tokens: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load({"PACER_API_TOKEN": TOKEN, "PACER_ROSTER": ROSTER, "PACER_API_TOKENS": tokens}, toml_path=None)
    assert str(refused.value) == says
    for token in ("tiny1", "abcdefabcdefabcdef", "fedcbafedcbafedcba", TOKEN):
        assert token not in str(refused.value)


def test_a_role_for_the_shared_token_must_be_one_pacer_has() -> None:
    with pytest.raises(ConfigError) as refused:
        load({"PACER_API_ROLE": "admin"}, toml_path=None)
    assert str(refused.value) == "PACER_API_ROLE='admin': must be 'member' or 'operator'"
    assert load({"PACER_ROSTER": ROSTER, "PACER_API_TOKENS": PERSONAL_TOKENS}, toml_path=None).api_role == "member"


def test_a_real_pacer_serve_logs_no_token_even_with_the_access_log_on(tmp_path) -> None:
    port = _port()
    bob = "bobs-own-token-0123456789"
    server = _serve(tmp_path, port, echo_seconds="0.1", PACER_ACCESS_LOG="true", PACER_ROSTER="bob=member",
                    PACER_API_TOKENS=f"bob={bob}", PACER_LOG_LEVEL="DEBUG")
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/", params={"token": SERVE_TOKEN}, timeout=10).status_code == 303
        assert httpx.get(f"{base}/", params={"token": bob}, timeout=10).status_code == 303
        assert httpx.get(f"{base}/", params={"token": bob + "x"}, timeout=10).status_code == 401
        for token in (SERVE_TOKEN, bob, bob + "x"):
            httpx.get(f"{base}/api/v1/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    finally:
        server.send_signal(signal.SIGTERM)
        log, _ = server.communicate(timeout=60)
    assert 'GET /?token=*** HTTP/1.1" 303' in log, log[-2000:]
    assert SERVE_TOKEN not in log and bob not in log


def test_a_member_holds_only_their_own_sessions_over_the_api_as_in_slack(api) -> None:
    bobs = as_token(api, "POST", "/sessions", PERSONAL["bob"], json={"prompt": "bob's"}).json()["session"]["id"]
    carols = as_token(api, "POST", "/sessions", PERSONAL["carol"], json={"prompt": "carol's"}).json()["session"]["id"]
    assert as_token(api, "POST", "/holds", PERSONAL["bob"], json={"selector": f"#{bobs}"}).status_code == 201
    for selector, says in [(f"#{carols}", "requested by carol"), (f"{bobs},{carols}", "requested by carol"),
                           ("all", "holding all needs the operator role"), ("genesis:api", "needs the operator role")]:
        refused = as_token(api, "POST", "/holds", PERSONAL["bob"], json={"selector": selector})
        assert refused.status_code == 403 and says in refused.json()["message"], (selector, refused.text)
        # the shared token, a member unless set, is refused the same
        assert as_token(api, "POST", "/holds", TOKEN, json={"selector": selector}).status_code == 403
    assert as_token(api, "POST", "/holds", PERSONAL["alice"], json={"selector": "all"}).status_code == 201
    assert len(api.get("/holds").json()["operator_holds"]) == 2
