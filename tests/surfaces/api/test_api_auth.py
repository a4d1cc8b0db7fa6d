"""The REST API's door: the bearer token, the acting human's role, and every error body — 401,
403, 404, 409, 413 and 422 each say what is wrong (which field, what is allowed)."""

from __future__ import annotations

import json

import pytest

from tests.support.api_client import TOKEN, make_api


def test_an_unset_token_answers_every_call_401_saying_it_is_not_configured(engine, clock, request) -> None:
    api = make_api(engine, clock, PACER_API_TOKEN="", PACER_API_TOKENS="")
    request.addfinalizer(api.close)
    for method, path in [("GET", "/sessions"), ("POST", "/sessions"), ("GET", "/policy"), ("DELETE", "/triggers/1")]:
        r = api.call(method, path, json={"prompt": "x"} if method == "POST" else None)
        assert r.status_code == 401, (method, path)
        assert r.json()["error"] == "unauthorized"
        assert "API token is not configured" in r.json()["message"] and "PACER_API_TOKEN" in r.json()["message"]
    # Nothing was created by the refused POST.
    api2 = make_api(engine, clock)
    request.addfinalizer(api2.close)
    assert api2.get("/sessions").json()["count"] == 0


def test_a_missing_or_wrong_token_is_401_and_says_which(api) -> None:
    missing = api.get("/sessions", token=None)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert "missing bearer token" in missing.json()["message"]
    wrong = api.get("/sessions", token=TOKEN + "x")
    assert wrong.status_code == 401 and wrong.json() == {
        "error": "unauthorized",
        "message": "the bearer token is not valid",
    }
    basic = api.client.get("/api/v1/sessions", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401 and "missing bearer token" in basic.json()["message"]


def test_the_token_is_checked_before_the_body_is_parsed(api) -> None:
    r = api.client.post("/api/v1/sessions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 401
    r = api.client.post(
        "/api/v1/sessions", content=b"{not json", headers={**api.headers(), "Content-Type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["error"] == "invalid_input"


def test_the_shared_token_naming_an_actor_is_403_saying_whose_token_to_send(api) -> None:
    for someone in ("mallory", "alice"):  # off the roster, or on it: the shared token speaks for neither
        r = api.get("/sessions", token=TOKEN, actor=someone) if someone == "mallory" else api.client.get(
            "/api/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}", "X-Pacer-Actor": someone})
        assert r.status_code == 403
        assert r.json()["error"] == "forbidden"
        assert (
            f"speaks as 'api token', not for '{someone}'" in r.json()["message"]
            and "PACER_API_TOKENS" in r.json()["message"]
        )


def test_a_member_cannot_change_policy_or_triggers_and_is_told_the_role_needed(api) -> None:
    r = api.patch("/policy", {"max_sessions": 4}, actor="bob")
    assert r.status_code == 403 and "operator role" in r.json()["message"] and "bob is a member" in r.json()["message"]
    r = api.post(
        "/triggers",
        {"name": "t", "kind": "schedule", "prompt_template": "sweep", "config": {"cron": "0 9 * * *"}},
        actor="bob",
    )
    assert r.status_code == 403
    assert api.get("/triggers").json()["count"] == 0
    assert api.get("/policy").json()["policy"]["max_sessions"] == 2  # unchanged


def test_a_member_steers_only_their_own_sessions(api) -> None:
    mine = api.post("/sessions", {"prompt": "bob's work"}, actor="bob").json()["session"]
    theirs = api.post("/sessions", {"prompt": "carol's work"}, actor="carol").json()["session"]
    assert mine["requester"] == "bob"
    refused = api.patch(f"/sessions/{theirs['id']}", {"precedence": 50}, actor="bob")
    assert refused.status_code == 403
    assert "requested by carol" in refused.json()["message"]
    assert api.post(f"/sessions/{theirs['id']}/archive", actor="bob").status_code == 403
    assert api.patch(f"/sessions/{mine['id']}", {"precedence": 50}, actor="bob").status_code == 200
    assert api.patch(f"/sessions/{theirs['id']}", {"precedence": 50}, actor="alice").status_code == 200


def test_unknown_ids_are_404_with_the_id_named(api) -> None:
    for method, path in [("GET", "/sessions/999"), ("PATCH", "/sessions/999"), ("POST", "/sessions/999/start_now"),
                         ("POST", "/sessions/999/archive"), ("GET", "/triggers/999"), ("DELETE", "/triggers/999"),
                         ("PATCH", "/triggers/999"), ("POST", "/triggers/999/invoke")]:
        body = {"precedence": 1} if method == "PATCH" else None
        r = api.call(method, path, json=body)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"] == "not_found" and "#999 does not exist" in r.json()["message"]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"prompt": "x", "place": "top_of_spot", "precedence": 5}, "place", "not both"),
        ({"prompt": "x", "place": "top"}, "place", "top_of_spot"),
        ({"prompt": "x", "scheduling_class": "urgent"}, "scheduling_class", "'priority', 'spot' or 'default'"),
        ({"prompt": "x", "genesis": "email"}, "genesis", "'command'"),
        ({"prompt": "x", "weight": -1}, "weight", "greater than or equal to 0"),
        ({"prompt": "x", "capacity": 0}, "capacity", "greater than or equal to 1"),
        ({"prompt": "x", "colour": "blue"}, "colour", "not a field"),
        ({"prompt": ""}, "prompt", "at least 1 character"),
        ({}, "prompt", "Field required"),
        ({"prompt": "x", "runtime": "gpt-9"}, "runtime", "not configured here"),
        ({"prompt": "x", "parent_session_id": 1, "forked_from": 1}, "forked_from", "not both"),
    ],
)
def test_a_bad_session_create_is_422_naming_the_field_and_creates_nothing(api, body, field, says) -> None:
    r = api.post("/sessions", body)
    assert r.status_code == 422, r.text
    data = r.json()
    assert data["error"] == "invalid_input" and data["field"] == field
    assert says in data["message"] or any(says in e.get("allowed", "") for e in data.get("errors", [])), data
    assert api.get("/sessions").json()["count"] == 0


def test_a_prompt_over_the_limit_is_422_and_a_body_over_the_limit_is_413(engine, clock, request) -> None:
    api = make_api(engine, clock, PACER_MAX_PROMPT_CHARS="10", PACER_MAX_BODY_BYTES="2048")
    request.addfinalizer(api.close)
    r = api.post("/sessions", {"prompt": "x" * 11})
    assert r.status_code == 422 and r.json()["field"] == "prompt" and "the limit is 10" in r.json()["message"]
    r = api.post("/sessions", {"prompt": "x" * 5000})
    assert r.status_code == 413 and r.json()["error"] == "too_large" and "PACER_MAX_BODY_BYTES" in r.json()["message"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("?limit=501", "limit"), ("?limit=0", "limit"), ("?status=sleeping", "status"), ("?genesis=email", "genesis"),
     ("?class=urgent", "class"), ("?order=random", "order")],
)
def test_bad_list_filters_are_422_naming_the_parameter(api, query, field) -> None:
    r = api.get(f"/sessions{query}")
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_the_openapi_document_parses_and_lists_every_path(api) -> None:
    document = json.loads(json.dumps(api.server.app.openapi()))
    paths = document["paths"]
    expected = {
        "/api/v1/sessions": {"get", "post"},
        "/api/v1/sessions/{session_id}": {"get", "patch"},
        "/api/v1/sessions/{session_id}/start_now": {"post"},
        "/api/v1/sessions/{session_id}/archive": {"post"},
        "/api/v1/sessions/{session_id}/messages": {"post"},
        "/api/v1/triggers": {"get", "post"},
        "/api/v1/triggers/{trigger_id}": {"get", "patch", "delete"},
        "/api/v1/triggers/{trigger_id}/invoke": {"post"},
        "/api/v1/policy": {"get", "patch"},
        "/api/v1/holds": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    create = document["components"]["schemas"]["SessionCreate"]
    assert create["additionalProperties"] is False and "place" in create["properties"]
    served = api.client.get("/openapi.json")
    assert served.status_code == 200 and set(expected) <= set(served.json()["paths"])


def test_chat_with_the_shared_token_acts_as_the_api_token_with_its_role_as_every_other_route_does(api) -> None:
    # The harness's automation is an operator (PACER_API_ROLE=operator): it may PATCH /policy;
    # `policy set` over /chat is the same change, so it is allowed there too, and audited under
    # the same name, "api token" — not a person.
    assert api.patch("/policy", {"max_sessions": 3}).status_code == 200
    r = api.post("/chat", {"text": "policy set max_sessions=4"})
    assert r.status_code == 200 and r.json()["ok"] is True, r.json()
    out = api.get("/policy").json()
    assert out["policy"]["max_sessions"] == 4 and "via api by api token: max_sessions 3 -> 4" in out["audit"][0]
    created = api.post("/chat", {"text": "new fix the build"}).json()
    assert created["ok"] is True and "Created" in created["text"], created
    # A human message needs a person on the roster: the automation's `reply` is refused, naming why.
    anonymous = api.post("/chat", {"text": "reply 1 also the docs"}).json()
    assert anonymous["ok"] is False and "api token is not on the roster" in anonymous["text"]
    assert api.post("/chat", {"text": "reply 1 also the docs"}, actor="alice").json()["ok"] is True
    # A person keeps their own role: a member is refused the operator's command.
    refused = api.post("/chat", {"text": "policy set max_sessions=5"}, actor="bob").json()
    assert (
        refused["ok"] is False
        and "needs the operator role" in refused["text"]
        and "you are a member" in refused["text"]
    )
    assert api.get("/policy").json()["policy"]["max_sessions"] == 4
