"""A request the OpenAPI document calls valid is never a 422: a reference to something missing
is a 404, a clash with the present state (the clock, a trigger's kind) a 409, and every rule a
schema can state is in the served document. Each answer still names the field at fault and
changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jsonschema_rs
import pytest

from bot import api as rest_api
from bot.api.callers import ACTOR_HEADER
from tests.support.api_client import Api, make_api


def _document(api: Api) -> dict[str, Any]:
    return dict(api.client.get("/openapi.json").json())


def _valid(api: Api, model: str, body: Any) -> bool:
    """Does the served document call `body` a valid `model`?"""
    document = _document(api)
    schema = {**document["components"]["schemas"][model], "components": document["components"]}
    return bool(jsonschema_rs.validator_for(schema).is_valid(body))


@pytest.mark.parametrize("field", ["parent_session_id", "forked_from"])
def test_a_session_naming_a_missing_session_is_404_naming_the_field(api: Api, field: str) -> None:
    body = {"prompt": "x", field: 77}
    assert _valid(api, "SessionCreate", body)
    r = api.post("/sessions", body)
    assert r.status_code == 404, r.text
    assert r.json() == {"error": "not_found", "field": field, "message": f"{field}: session #77 does not exist"}
    assert api.get("/sessions").json()["count"] == 0
    assert "404" in _document(api)["paths"]["/api/v1/sessions"]["post"]["responses"]


def test_a_pause_until_a_past_time_is_409_naming_until(api: Api) -> None:
    assert api.post("/sessions", {"prompt": "first"}).status_code == 201
    before = api.get("/sessions/1").json()
    past = (api.ctx.clock.now() - timedelta(minutes=1)).isoformat()
    r = api.post("/sessions/1/pause", {"until": past})
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "conflict" and r.json()["field"] == "until"
    assert "is not in the future" in r.json()["message"]
    assert api.get("/sessions/1").json() == before


def test_a_temporary_max_out_of_its_window_is_409_and_without_expiry_the_document_refuses_it(api: Api) -> None:
    before = api.get("/policy").json()["policy"]
    now = api.ctx.clock.now()
    for until in (now - timedelta(minutes=1), now + timedelta(days=8)):
        r = api.patch("/policy", {"max_sessions_override": 5, "max_sessions_override_until": until.isoformat()})
        assert r.status_code == 409, r.text
        assert r.json()["error"] == "conflict" and r.json()["field"] == "max_sessions_override_until"
        assert "at most 7 days away" in r.json()["message"]
    # Without its expiry, or with a null one, the document itself calls it invalid: a 422.
    for body in ({"max_sessions_override": 5}, {"max_sessions_override": 5, "max_sessions_override_until": None}):
        assert not _valid(api, "PolicyPatch", body), body
        r = api.patch("/policy", body)
        assert r.status_code == 422 and r.json()["field"] == "max_sessions_override_until", r.text
    assert api.get("/policy").json()["policy"] == before
    fine = {"max_sessions_override": 5, "max_sessions_override_until": (now + timedelta(hours=2)).isoformat()}
    assert _valid(api, "PolicyPatch", fine)
    assert api.patch("/policy", fine).status_code == 200


def test_the_document_lists_the_runtimes_a_budget_and_a_spend_reset_may_name(api: Api) -> None:
    runtimes = sorted(api.ctx.limits.runtimes)
    assert not _valid(api, "SpendReset", {"runtime": "gpt-9"})
    assert _valid(api, "SpendReset", {"runtime": runtimes[0]})
    assert not _valid(api, "PolicyPatch", {"cost_budgets": {"gpt-9": 10}})
    assert _valid(api, "PolicyPatch", {"cost_budgets": {runtimes[0]: 10}})
    r = api.post("/policy/reset-spend", {"runtime": "gpt-9"})
    assert r.status_code == 422 and r.json()["field"] == "runtime", r.text


def test_changing_a_triggers_kind_is_409_naming_kind(api: Api) -> None:
    trigger = {"name": "nightly", "kind": "schedule", "prompt_template": "sweep", "config": {"cron": "0 9 * * *"}}
    assert api.post("/triggers", trigger).status_code == 201
    r = api.patch("/triggers/1", {"kind": "slack", "precedence": 4})
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "conflict" and r.json()["field"] == "kind"
    assert "cannot change (schedule -> slack)" in r.json()["message"]
    assert api.get("/triggers/1").json()["precedence"] is None
    assert api.patch("/triggers/1", {"kind": "schedule", "precedence": 4}).status_code == 200


def test_a_follow_up_has_an_example_a_client_and_a_generator_can_start_from(api: Api) -> None:
    text = _document(api)["components"]["schemas"]["MessageCreate"]["properties"]["text"]
    assert text["examples"] and all(_valid(api, "MessageCreate", {"text": e}) for e in text["examples"])


def test_the_document_says_a_sleep_does_not_halt(api: Api) -> None:
    assert api.post("/sessions", {"prompt": "first"}).status_code == 201
    until = (api.ctx.clock.now() + timedelta(hours=1)).isoformat()
    assert not _valid(api, "PauseCreate", {"until": until, "halt": True})
    assert _valid(api, "PauseCreate", {"until": until, "halt": False}) and _valid(api, "PauseCreate", {"halt": True})
    r = api.post("/sessions/1/pause", {"until": until, "halt": True})
    assert r.status_code == 422 and r.json()["field"] == "halt", r.text


GOOD_CONFIGS = {
    "slack": {"channels": ["C0X"], "dms": False},
    "github_issue": {"repositories": ["acme/api"], "labels": ["bug"], "trusted_associations": ["OWNER"]},
    "github_label": {"label": "pacer", "pull_requests": False},
    "schedule": {"cron": "*/15 9 1 12 6", "timezone": "Europe/Paris"},
    "ao_event": {"filter": {"genesis": "api"}, "states": ["done"]},
}
BAD_CONFIGS = [
    ("slack", None, "config"),
    ("slack", {}, "config.channels"),
    ("slack", {"channels": [], "dms": False}, "config.channels"),
    ("schedule", {}, "config.cron"),
    ("schedule", {"cron": "99 * * * *"}, "config.cron"),
    ("schedule", {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "config.timezone"),
    ("github_label", {"issues": False, "pull_requests": False}, "config.issues"),
    ("ao_event", {"session_id": 1}, "config.states"),
    ("ao_event", {"events": ["no_sessions_in_progress"], "states": ["done"]}, "config.states"),
    ("github_issue", {"cron": "0 9 * * *"}, "config.cron"),
]


def test_each_kinds_config_is_in_the_document_and_what_it_refuses_the_server_refuses(api: Api) -> None:
    for kind, config in GOOD_CONFIGS.items():
        body = {"name": f"t-{kind}", "kind": kind, "prompt_template": "go", "config": config}
        assert _valid(api, "TriggerCreate", body), body
        assert api.post("/triggers", body).status_code == 201, body
    for kind, config, field in BAD_CONFIGS:
        body = {"name": "bad", "kind": kind, "prompt_template": "go", **({} if config is None else {"config": config})}
        assert not _valid(api, "TriggerCreate", body), body
        r = api.post("/triggers", body)
        assert r.status_code == 422 and r.json()["field"].startswith(field.split(".")[0]), (body, r.text)
    assert api.get("/triggers").json()["count"] == len(GOOD_CONFIGS)


def test_a_change_whose_config_fits_another_kind_is_409_naming_both(api: Api) -> None:
    assert api.post("/triggers", {"name": "t", "kind": "schedule", "prompt_template": "go",
                                  "config": {"cron": "0 9 * * *"}}).status_code == 201
    change = {"config": {"channels": ["C0X"]}}
    assert _valid(api, "TriggerPatch", change)
    r = api.patch("/triggers/1", change)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "conflict" and r.json()["field"].startswith("config")
    assert "fits a slack trigger, and this one is schedule" in r.json()["message"]
    assert api.get("/triggers/1").json()["config"]["cron"] == "0 9 * * *"
    nothing = {"config": {"colour": "blue"}}
    assert not _valid(api, "TriggerPatch", nothing)
    assert api.patch("/triggers/1", nothing).status_code == 422


def test_a_whole_number_written_with_a_point_is_an_id_in_a_config_as_anywhere(api: Api) -> None:
    # JSON Schema's integer takes 3.0, and so does every other id field of the API.
    for name, config in (("by-id", {"session_id": 3.0, "states": ["done"]}),
                         ("by-filter", {"filter": {"trigger": 2.0}, "states": ["done"]})):
        body = {"name": name, "kind": "ao_event", "prompt_template": "go", "config": config}
        assert _valid(api, "TriggerCreate", body)
        r = api.post("/triggers", body)
        assert r.status_code == 201, r.text
    configs = [t["config"] for t in api.get("/triggers").json()["triggers"]]
    assert {"session_id": 3, "states": ["done"]} in configs
    assert {"filter": {"trigger": 2}, "states": ["done"]} in configs
    assert api.post("/triggers", {"name": "half", "kind": "ao_event", "prompt_template": "go",
                                  "config": {"session_id": 3.5, "states": ["done"]}}).status_code == 422


def test_apps_in_one_process_share_the_built_routes_and_each_documents_its_own_limits(engine, clock) -> None:
    """The REST router is built once a process (a tenth of a second of CPU an app, paid once): each
    app still documents its own deployment, and the actor header once on each operation."""
    assert rest_api.router() is rest_api.router()
    short = make_api(engine, clock, PACER_MAX_PROMPT_CHARS="100")
    long = make_api(engine, clock, PACER_MAX_PROMPT_CHARS="200")
    try:
        for api, most in ((short, 100), (long, 200), (short, 100)):
            document = _document(api)
            assert document["components"]["schemas"]["SessionCreate"]["properties"]["prompt"]["maxLength"] == most
            post = document["paths"]["/api/v1/sessions"]["post"]
            assert [p["name"] for p in post["parameters"]].count(ACTOR_HEADER) == 1
            assert api.post("/sessions", {"prompt": "x" * (most + 1)}).status_code == 422
            assert api.post("/sessions", {"prompt": "x" * most}).status_code == 201
    finally:
        short.close()
        long.close()
