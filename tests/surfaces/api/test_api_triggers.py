"""/api/v1/triggers over real HTTP: create with validated kind-specific config and template, read,
change (a class change reports `reclassified_waiting_sessions` and releases the promoted ones
off the request, through StartNow), delete, and invoke by hand (`api` genesis)."""

from __future__ import annotations

import pytest

from scheduler.store.db import session_scope
from scheduler.store.models import Session

pytestmark = pytest.mark.api(max_sessions=2, turn_minutes=30)

SCHEDULE = {"name": "nightly", "kind": "schedule", "prompt_template": "Sweep the flaky tests (fired {{ fired_at }})",
            "config": {"cron": "0 3 * * *", "timezone": "Europe/Vilnius"}}
LABEL = {"name": "label-pacer", "kind": "github_label", "prompt_template": "Work on {{ title }}: {{ url }}",
         "config": {"label": "pacer"}}


def make(api, body, **over):
    r = api.post("/triggers", {**body, **over})
    assert r.status_code == 201, r.text
    return r.json()


def invoke(api, trigger_id, **context):
    r = api.post(f"/triggers/{trigger_id}/invoke", {"context": context})
    assert r.status_code == 201, r.text
    return r.json()


def test_create_read_list_and_delete(api) -> None:
    t = make(api, SCHEDULE, scheduling_class="priority", precedence=20, concurrency_group="repo:acme/api")
    assert t["kind"] == "schedule" and t["scheduling_class"] == "priority" and t["precedence"] == 20
    assert t["config"] == {"cron": "0 3 * * *", "timezone": "Europe/Vilnius"} and t["enabled"] is True
    label = make(api, LABEL)
    assert label["scheduling_class"] == "default"
    assert api.get(f"/triggers/{t['id']}").json()["name"] == "nightly"
    listed = api.get("/triggers").json()
    assert listed["count"] == 2 and [x["name"] for x in listed["triggers"]] == ["nightly", "label-pacer"]
    assert [x["name"] for x in api.get("/triggers?kind=github_label").json()["triggers"]] == ["label-pacer"]
    invoke(api, label["id"], title="Fix login", url="https://github.com/acme/api/issues/7")
    gone = api.delete(f"/triggers/{label['id']}")
    assert gone.status_code == 200 and gone.json() == {"deleted": label["id"], "detached_sessions": 1}
    assert api.get(f"/triggers/{label['id']}").status_code == 404
    with session_scope(api.ctx.engine) as db:
        kept = db.get(Session, 1)
        assert kept is not None and kept.trigger_id is None and kept.source["trigger"] == "label-pacer"


@pytest.mark.parametrize(
    ("over", "field", "says"),
    [
        ({"config": {"cron": "0 25 * * *"}}, "config.cron", "the hour field '25'"),
        ({"config": {"cron": "0 3 * *"}}, "config.cron", "has 4 fields"),
        ({"config": {"cron": "0 3 * * *", "timezone": "Mars/Olympus"}}, "config.timezone", "IANA time zone"),
        ({"config": {"cron": "0 3 * * *", "every": "day"}}, "config.every", "takes cron, timezone"),
        ({"config": {}}, "config.cron", "required for schedule"),
        ({"prompt_template": "Sweep\n{% if x %}unclosed"}, "prompt_template", "line 2"),
        ({"prompt_template": "{{ nope.field }}"}, "prompt_template", "it may read"),
        ({"prompt_template": "{{ text }}"}, "prompt_template", "empty prompt"),
        ({"precedence": "top_of_spot"}, "precedence", "whole number only"),
        ({"precedence": 1.5}, "precedence", "whole number only"),
        ({"scheduling_class": "urgent"}, "scheduling_class", "'priority', 'spot' or 'default'"),
        ({"kind": "email"}, "kind", "'slack'"),
        ({"name": "bad\nname"}, "name", "letters, digits"),
        (
            {"kind": "github_label", "config": {}, "prompt_template": "{{ titel }}"},
            "prompt_template",
            "'titel' is undefined",
        ),
    ],
)
def test_a_bad_trigger_is_422_naming_the_field_and_writes_nothing(api, over, field, says) -> None:
    r = api.post("/triggers", {**SCHEDULE, **over})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and says in r.json()["message"], r.json()
    assert api.get("/triggers").json()["count"] == 0


@pytest.mark.parametrize(
    ("kind", "config", "field", "says"),
    [
        ("github_issue", {"repositories": ["not a repo"]}, "config.repositories", "owner/name"),
        ("github_issue", {"label": "bug"}, "config.label", "takes repositories, labels"),
        ("github_label", {"label": ""}, "config.label", "non-empty"),
        ("github_label", {"issues": False, "pull_requests": False}, "config.issues", "never fire"),
        ("github_label", {"trusted_associations": ["ADMIN"]}, "config.trusted_associations", "OWNER"),
        ("slack", {}, "config.channels", "channels"),
        ("slack", {"dms": "yes"}, "config.dms", "true or false"),
        ("ao_event", {"states": ["done"]}, "config.session_id", "exactly one"),
        (
            "ao_event",
            {"session_id": 3, "filter": {"genesis": "api"}, "states": ["done"]},
            "config.session_id",
            "exactly one",
        ),
        ("ao_event", {"session_id": 3, "states": ["finished"]}, "config.states", "'finished' is not a state"),
        ("ao_event", {"session_id": 3}, "config.states", "required"),
        ("ao_event", {"filter": {"colour": "red"}, "states": ["done"]}, "config.filter.colour", "not a filter key"),
        ("ao_event", {"filter": {"genesis": "email"}, "states": ["done"]}, "config.filter.genesis", "not a genesis"),
    ],
)
def test_kind_specific_config_is_validated(api, kind, config, field, says) -> None:
    template = "Look at {{ session.title }}" if kind == "ao_event" else "Look at {{ text }}"
    r = api.post("/triggers", {"name": "t", "kind": kind, "prompt_template": template, "config": config})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and says in r.json()["message"], r.json()


def test_names_are_unique_and_a_kind_never_changes(api) -> None:
    t = make(api, SCHEDULE)
    dup = api.post("/triggers", SCHEDULE)
    assert dup.status_code == 409 and "already exists" in dup.json()["message"]
    kind = api.patch(f"/triggers/{t['id']}", {"kind": "github_label"})
    assert kind.status_code == 409 and kind.json()["field"] == "kind"
    empty = api.patch(f"/triggers/{t['id']}", {})
    assert empty.status_code == 422
    top = api.patch(f"/triggers/{t['id']}", {"precedence": "top_of_spot"})
    assert top.status_code == 422 and "whole number only" in top.json()["message"]
    bad_cron = api.patch(f"/triggers/{t['id']}", {"config": {"cron": "99 * * * *"}})
    assert bad_cron.status_code == 422 and bad_cron.json()["field"] == "config.cron"
    assert api.get(f"/triggers/{t['id']}").json()["config"]["cron"] == "0 3 * * *"


def test_invoke_fires_by_hand_as_api_genesis_with_the_triggers_stamp(api) -> None:
    t = make(api, LABEL, scheduling_class="priority", precedence=12)
    out = invoke(api, t["id"], title="Fix login", url="https://x/1")
    s = out["session"]
    assert s["genesis"] == "api" and s["trigger_id"] == t["id"]
    assert s["scheduling_class"] == "priority" and s["class_source"] == "trigger" and s["precedence"] == 12
    assert s["prompt"] == "Work on Fix login: https://x/1" and out["submission"]["outcome"] == "started"
    missing = api.post(f"/triggers/{t['id']}/invoke", {"context": {"title": "no url"}})
    assert (
        missing.status_code == 422
        and missing.json()["field"] == "prompt_template"
        and "url" in missing.json()["message"]
    )


def test_a_class_change_moves_waiting_sessions_reports_the_count_and_releases_them(api) -> None:
    api.quota.spend_out()
    t = make(api, LABEL, scheduling_class="spot")
    waiting = [invoke(api, t["id"], title=f"issue {i}", url="u")["session"]["id"] for i in range(3)]
    assert all(api.get(f"/sessions/{sid}").json()["hold"] for sid in waiting)
    # Moved by hand: a per-session choice outranks the trigger's.
    api.patch(f"/sessions/{waiting[0]}", {"scheduling_class": "spot"})
    # Parked on purpose: its own resume owner, not this release.
    with session_scope(api.ctx.engine) as db:
        parked = db.get(Session, waiting[1])
        assert parked is not None
        parked.pause_reason, parked.pause_at = "user_spot_queue", api.ctx.clock.now()
        db.add(parked)
    r = api.patch(f"/triggers/{t['id']}", {"scheduling_class": "priority"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reclassified_waiting_sessions"] == 2 and out["changed"] == ["scheduling_class"]
    assert sorted(out["released"]) == sorted(waiting[1:])
    # The release runs off the request: nothing started yet.
    assert [api.get(f"/sessions/{sid}").json()["status"] for sid in waiting] == ["waiting"] * 3
    api.settle()
    statuses = [api.get(f"/sessions/{sid}").json()["status"] for sid in waiting]
    assert statuses == ["waiting", "waiting", "running"]
    assert api.get(f"/sessions/{waiting[0]}").json()["scheduling_class"] == "spot"


def test_a_rewrite_that_resolves_to_the_same_class_is_not_counted(api) -> None:
    api.quota.spend_out()
    t = make(api, LABEL)  # default: the sessions derive from api genesis, spot
    sid = invoke(api, t["id"], title="a", url="u")["session"]["id"]
    r = api.patch(f"/triggers/{t['id']}", {"scheduling_class": "spot"}).json()
    assert r["reclassified_waiting_sessions"] == 0 and r["released"] == []
    assert api.get(f"/sessions/{sid}").json()["class_source"] == "trigger"
    back = api.patch(f"/triggers/{t['id']}", {"scheduling_class": "default"}).json()
    assert back["reclassified_waiting_sessions"] == 0
    assert api.get(f"/sessions/{sid}").json()["class_source"] == "genesis"
    other = api.patch(f"/triggers/{t['id']}", {"precedence": 9, "enabled": False}).json()
    assert sorted(other["changed"]) == ["enabled", "precedence"] and other["reclassified_waiting_sessions"] == 0
