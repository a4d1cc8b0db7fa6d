"""The OpenAPI document tells the truth: every request drawn from /openapi.json itself, sent to
the real app, gets an answer the document describes, and a request it calls valid is refused
only for a rule the document cannot state.

Schemathesis reads the document the running app serves (with this deployment's limits: the
longest prompt, the runtimes configured) and draws requests for every /api/v1 operation, both
valid by the document (positive) and breaking it on purpose (negative). Each goes over real HTTP
on loopback to the FastAPI app under uvicorn, on a real SQLite file and on PostgreSQL, with one
of several callers: the shared token, an operator and a member by their own tokens, a token
naming someone it does not speak for, no token, a wrong token (a case drawn with broken headers keeps them). Path ids
point at rows that exist
two times in three. Each answer is checked:

    not a server error       no 5xx, ever
    status documented        the status is one the operation lists
    body and headers         the body (every error body too) fits the schema of that status;
                             the content type is the documented one
    negative rejected        a request that breaks the document is answered 4xx
    positive accepted        a request the document calls valid is never answered 422: a row
                             it names that is missing is a 404, a clash with the present (a
                             time passed, a trigger's kind) a 409

Derandomized, so CI sees the same requests; PACER_SCHEMA_EXAMPLES sets how many per database
(by hand: 2000 explores much further).

Beside that draw, schemathesis's own run (`test_a_schemathesis_run_with_every_check_finds_nothing`):
every check it has (the ones above, and a missing required header, an unsupported method, the
Allow header, ignored auth, use after free, resource availability) over its examples, coverage
(what the document calls valid) and fuzzing phases, with seed 1 and PACER_SCHEMA_RUN_EXAMPLES
per operation (6 in CI; by hand, more), stopped at 30 s on a slow machine; zero failures.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any, get_args

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import load_all_checks, not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.core.result import Err, Ok
from schemathesis.engine import events as engine_events
from schemathesis.engine import from_schema as engine_from_schema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import Engine

from bot.api.fields import GenesisName, StatusName, TriggerKind
from bot.triggers.spec import KINDS
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.rules.genesis import Genesis
from scheduler.store.models import Status
from tests.support.api_client import PERSONAL, TOKEN, Api, make_api

load_all_checks()
# The draw is derandomized: a new operation reshuffles it. At 100 the draw that came with
# POST /sessions/{id}/summary drew no 422 at all; 110 reaches one again.
EXAMPLES = int(os.environ.get("PACER_SCHEMA_EXAMPLES", "110"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance,
]
# Who calls: mostly the shared token (the harness's operator automation), so most requests reach
# the route behind the door; people by their own tokens; the shared token naming someone; no token.
CALLERS = st.sampled_from([
    {"Authorization": f"Bearer {TOKEN}"},
    {"Authorization": f"Bearer {TOKEN}"},
    {"Authorization": f"Bearer {TOKEN}"},
    {"Authorization": f"Bearer {PERSONAL['alice']}", "X-Pacer-Actor": "alice"},
    {"Authorization": f"Bearer {PERSONAL['bob']}"},
    {"Authorization": f"Bearer {PERSONAL['bob']}", "X-Pacer-Actor": "alice"},
    {"Authorization": f"Bearer {TOKEN}", "X-Pacer-Actor": "mallory"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {},
])


def _with_rows(api: Api) -> Api:
    """Rows for the path ids to find: two sessions (one archived) and a trigger."""
    assert api.post("/sessions", {"prompt": "first"}).status_code == 201
    assert api.post("/sessions", {"prompt": "second", "scheduling_class": "spot"}).status_code == 201
    assert api.post("/sessions/2/archive").status_code == 200
    trigger = {"name": "nightly", "kind": "schedule", "prompt_template": "sweep", "config": {"cron": "0 9 * * *"}}
    assert api.post("/triggers", trigger).status_code == 201
    return api


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Api]:
    api = _with_rows(make_api(any_engine, clock))
    yield api
    api.close()


def _served_operations(api: Api) -> list[Any]:
    """Every /api/v1 operation of the served document; one schemathesis cannot read fails here."""
    config = schemathesis.Config.from_dict({"generation": {"allow-x00": False}})
    schema = schemathesis.openapi.from_dict(api.client.get("/openapi.json").json(), config=config)
    results = list(schema.get_all_operations())
    unreadable = [result.err() for result in results if isinstance(result, Err)]
    assert not unreadable, unreadable
    return [
        op for op in (result.ok() for result in results if isinstance(result, Ok)) if op.path.startswith("/api/v1/")
    ]


def test_every_answer_is_one_the_document_describes(api: Api) -> None:
    operations = _served_operations(api)
    assert len(operations) >= 17
    cases = st.one_of([op.as_strategy(generation_mode=mode) for op in operations for mode in GenerationMode])
    statuses: dict[int, int] = {}

    @given(case=cases, caller=CALLERS, existing=st.sampled_from([None, 1, 2]))
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def answer_is_documented(case: Any, caller: dict[str, str], existing: int | None) -> None:
        # The caller and the row ids replace what was drawn only where that keeps the case what
        # it was drawn as: a negative case keeps its broken path and its broken headers.
        path_negative = case.meta.is_negative_at(ParameterLocation.PATH)
        for name in ("session_id", "trigger_id"):
            if existing is not None and not path_negative and name in (case.path_parameters or {}):
                case.path_parameters[name] = existing if name == "session_id" else 1
        headers = None if case.meta.is_negative_at(ParameterLocation.HEADER) else caller
        response = case.call(base_url=api.server.url, headers=headers)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        case.validate_response(response, checks=CHECKS)

    answer_is_documented()
    # The draw reached past the door: requests were taken, and refused for being wrong.
    assert any(200 <= status < 300 for status in statuses), statuses
    assert 401 in statuses and 422 in statuses, statuses


def test_the_document_names_every_refusal_with_the_body_it_really_has(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    for path, methods in document["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in methods.items():
            responses = operation["responses"]
            assert {"400", "401", "403", "408", "413", "503"} <= set(responses), (method, path)
            own = [p for p in operation.get("parameters", []) if p["name"] != "X-Pacer-Actor"]
            if own or "requestBody" in operation:
                assert "422" in responses, (method, path)
            for status, answer in responses.items():
                if status.startswith("4") or status.startswith("5"):
                    ref = answer["content"]["application/json"]["schema"]["$ref"]
                    assert ref.rsplit("/", 1)[1].endswith("Body"), (method, path, status)
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    # Every bound is stated in JSON Schema's words (pydantic writes its own `ge`/`le` when it
    # cannot place a bound, and no client reads those).
    text = json.dumps(document)
    assert '"ge":' not in text and '"le":' not in text
    # A real 422 fits the schema it is documented with.
    refused = api.patch("/sessions/1", {})
    assert refused.status_code == 422
    body = refused.json()
    assert body["error"] == schemas["InvalidInputBody"]["properties"]["error"]["const"]
    assert set(body) <= set(schemas["InvalidInputBody"]["properties"])
    assert "give at least one of scheduling_class, precedence, place" in body["message"]


def test_an_empty_change_is_refused_naming_the_fields_and_changes_nothing(api: Api) -> None:
    before = api.get("/policy").json()["policy"]
    for path, fields in [("/sessions/1", "scheduling_class, precedence, place"),
                         ("/triggers/1", "name, kind, prompt_template"), ("/policy", "gating_enabled, reserve_5h_pct")]:
        r = api.patch(path, {})
        assert r.status_code == 422, (path, r.text)
        assert r.json()["field"] == "body" and fields in r.json()["message"], r.json()
    assert api.get("/policy").json()["policy"] == before
    schemas = api.client.get("/openapi.json").json()["components"]["schemas"]
    assert all(schemas[name]["minProperties"] == 1 for name in ("SessionPatch", "TriggerPatch", "PolicyPatch"))


@pytest.mark.parametrize("key", ["", "slack", "nonsense"])
def test_an_override_key_outside_the_documented_set_is_refused_even_as_a_removal(api: Api, key: str) -> None:
    before = api.get("/policy").json()["policy"]
    r = api.patch("/policy", {"genesis_class_overrides": {key: None}})
    assert r.status_code == 422 and r.json()["field"] == "genesis", r.text
    assert repr(key) in r.json()["message"] or "take their class from their trigger" in r.json()["message"]
    assert api.get("/policy").json()["policy"] == before


def test_closed_sets_are_enums_in_the_document_and_match_the_scheduler(api: Api) -> None:
    assert set(get_args(GenesisName)) == {g.value for g in Genesis}
    assert set(get_args(StatusName)) == {s.value for s in Status}
    assert get_args(TriggerKind) == KINDS
    document = api.client.get("/openapi.json").json()
    parameters = {p["name"]: p["schema"] for p in document["paths"]["/api/v1/sessions"]["get"]["parameters"]}
    assert parameters["genesis"]["anyOf"][0]["enum"] == list(get_args(GenesisName))
    kind = {p["name"]: p["schema"] for p in document["paths"]["/api/v1/triggers"]["get"]["parameters"]}["kind"]
    assert kind["anyOf"][0]["enum"] == list(KINDS)
    runtime = document["components"]["schemas"]["SessionCreate"]["properties"]["runtime"]
    assert runtime["anyOf"][0]["enum"] == sorted(api.ctx.limits.runtimes)
    prompt = document["components"]["schemas"]["SessionCreate"]["properties"]["prompt"]
    assert prompt["maxLength"] == api.pacer.settings.max_prompt_chars


def test_a_body_that_is_not_json_says_so_with_the_field_body(api: Api) -> None:
    for content, kind in [(b"{not json", "application/json"), (b"prompt=x", "application/x-www-form-urlencoded")]:
        r = api.client.post("/api/v1/sessions", content=content, headers={**api.headers(), "Content-Type": kind})
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "body" and "send one JSON object" in r.json()["message"], r.json()


@settings(max_examples=400, derandomize=True, database=None)
@given(st.one_of(st.from_regex(bounds.REPOSITORY_PATTERN), st.text(alphabet="aB0./-_\ngiT", max_size=10)))
def test_the_documented_repository_pattern_is_the_rule_the_server_checks(value: str) -> None:
    # One pattern (`bounds.REPOSITORY_PATTERN`) is both the document's and the server's: the
    # document's reader (ECMA 262, as jsonschema-rs reads it) must take from it what Python does.
    try:
        bounds.check_repository(value)
        taken = True
    except InvalidInput:
        taken = False
    assert (re.match(bounds.REPOSITORY_PATTERN, value) is not None) is taken
    assert (
        jsonschema_rs.validator_for({"type": "string", "pattern": bounds.REPOSITORY_PATTERN}).is_valid(value) is taken
    )


def test_a_method_a_path_does_not_take_is_405_listing_every_method_it_does(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    for path, operations in document["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        documented = sorted(method.upper() for method in operations)
        url = path.replace("{session_id}", "1").replace("{trigger_id}", "1").replace("{hold_id}", "1")
        for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} - set(documented)):
            r = api.client.request(method, url, headers=api.headers())
            assert r.status_code == 405, (method, path, r.text)
            assert r.headers["allow"] == ", ".join(documented), (method, path)
            assert r.json()["error"] == "method_not_allowed" and method in r.json()["message"], r.json()


# schemathesis's own run, as `st run --checks all --seed 1` makes it: its examples, coverage
# (every boundary and every way to break each schema) and fuzzing phases, with every check it
# has, on SQLite. The prompt limit is the deployment's own setting, kept small so a drawn body
# stays small: the served document says what it is.
RUN = {"seed": 1, "max_examples": int(os.environ.get("PACER_SCHEMA_RUN_EXAMPLES", "6")), "max_time": 30}


def test_a_schemathesis_run_with_every_check_finds_nothing(engine: Engine, clock: Any) -> None:
    api = _with_rows(make_api(engine, clock, PACER_MAX_PROMPT_CHARS="2000"))
    try:
        config = schemathesis.Config.from_dict({
            "seed": RUN["seed"],
            "max-time": RUN["max_time"],
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "base-url": api.server.url,
            "generation": {"max-examples": RUN["max_examples"], "allow-x00": False},
            # The coverage phase draws what the document calls valid (every boundary of every
            # schema), the fuzzing phase both ways: the draw above breaks the document on both
            # databases at length, and a negative coverage pass would double this run.
            "phases": {"examples": {"enabled": True},
                       "coverage": {"enabled": True, "generation": {"mode": "positive", "allow-x00": False}},
                       "fuzzing": {"enabled": True}, "stateful": {"enabled": False}},
        })
        config.projects.override.checks.update(included_check_names=["all"])
        schema = schemathesis.openapi.from_dict(api.client.get("/openapi.json").json(), config=config)
        failures, operations, cases = _run(schema.include(path_regex="^/api/v1/"))
    finally:
        api.close()
    assert operations >= 25 and cases >= 25 * RUN["max_examples"], (operations, cases)
    assert not failures, "\n".join(failures)


def _run(schema: Any) -> tuple[list[str], int, int]:
    """Every failure a check found (operation, check, request, answer), the operations tested, the cases sent."""
    failures: list[str] = []
    operations: set[str] = set()
    cases = 0
    for event in engine_from_schema(schema).execute():
        if isinstance(event, engine_events.FatalError):
            raise AssertionError(f"schemathesis stopped: {event.exception!r}")
        if isinstance(event, engine_events.EngineFinished):  # completed, or at max-time on a slow machine
            print(f"schemathesis: {event.stop_reason.name.lower()} after {event.running_time:.1f} s")
        if not isinstance(event, engine_events.ScenarioFinished) or event.label is None:
            continue
        operations.add(event.label)
        recorder = event.recorder
        cases += len(recorder.cases)
        for case_id, checks in recorder.checks.items():
            for check in checks:
                if check.status.name != "FAILURE":
                    continue
                sent = recorder.interactions.get(case_id)
                said = f"{event.label} {check.name}"
                if sent is not None:
                    said += f": {sent.request.method} {sent.request.uri} {(sent.request.body or b'')[:300]!r}"
                if sent is not None and sent.response is not None:
                    said += f" -> {sent.response.status_code} {sent.response.content[:300]!r}"
                failures.append(said)
    return failures, len(operations), cases
