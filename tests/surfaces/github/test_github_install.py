"""The GitHub App installed on repositories: Pacer makes `pacer:priority` and `pacer:hold` there
(those missing only), after answering, through GitHub's REST API (a loopback fake here)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from bot.github.install import Installed, installed
from bot.serve.app import create_app
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from tests.support.github_support import FakeGithub, headers, make_pacer, serving


def _repos(*names: str) -> list[dict[str, Any]]:
    return [
        {"id": n, "name": name.rpartition("/")[2], "full_name": name, "private": True} for n, name in enumerate(names)
    ]


@pytest.mark.parametrize(
    ("event", "payload", "expected"),
    [
        (
            "installation",
            {"action": "created", "installation": {"id": 7}, "repositories": _repos("octo/app", "octo/web")},
            Installed(7, ("octo/app", "octo/web")),
        ),
        (
            "installation_repositories",
            {
                "action": "added",
                "installation": {"id": 7},
                "repositories_added": _repos("octo/api"),
                "repositories_removed": [],
            },
            Installed(7, ("octo/api",)),
        ),
        (
            "installation",
            {"action": "created", "installation": {"id": True}, "repositories": [*_repos("octo/app", "no slash"), 3]},
            Installed(None, ("octo/app",)),
        ),
        ("installation", {"action": "created", "repositories": "all"}, Installed(None, ())),
        ("installation", {"action": "deleted", "installation": {"id": 7}, "repositories": _repos("octo/app")}, None),
        ("installation_repositories", {"action": "removed", "repositories_removed": _repos("octo/app")}, None),
        ("issues", {"action": "created", "repositories": _repos("octo/app")}, None),
    ],
)
def test_an_installation_names_the_repositories_it_gives_the_app(
    event: str, payload: dict[str, Any], expected: Installed | None
) -> None:
    assert installed(event, payload) == expected


def _deliver(client: httpx.Client, event: str, payload: dict[str, Any], delivery: str | None = None) -> httpx.Response:
    body = json.dumps(payload).encode()
    return client.post("/github/webhook", content=body, headers=headers(event, body, delivery=delivery))


def test_the_labels_pacer_reads_are_made_where_missing_and_a_redelivery_makes_none(
        engine: Engine, clock: Any, deferrer: Any, github: FakeGithub, caplog: pytest.LogCaptureFixture) -> None:
    github.labels["octo/web"] = [{"name": "Pacer:Hold", "color": "000000", "description": "ours"}]
    github.forbidden.add("octo/locked")
    with session_scope(engine) as db:  # "pacer" (the default) for every repository; "agent" for octo/api alone
        db.add(
            Trigger(name="any", kind="github_label", prompt_template="{{ title }}", config={}, created_at=clock.now())
        )
        db.add(
            Trigger(
                name="api",
                kind="github_label",
                prompt_template="{{ title }}",
                config={"label": "agent", "repositories": ["Octo/API"]},
                created_at=clock.now(),
            )
        )
        db.add(
            Trigger(
                name="off",
                kind="github_label",
                prompt_template="{{ title }}",
                config={"label": "later"},
                enabled=False,
                created_at=clock.now(),
            )
        )
    pacer = make_pacer(engine, clock, deferrer, GITHUB_TOKEN="ghp_test", GITHUB_API_URL=github.url + "/")
    app = create_app(pacer, start_scheduler=False)
    payload = {
        "action": "created",
        "installation": {"id": 7},
        "repositories": _repos("octo/app", "octo/web", "octo/locked"),
    }
    with (
        caplog.at_level(logging.INFO, logger="pacer.github"),
        serving(app) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        first = _deliver(client, "installation", payload, delivery="install-1")
        assert app.state.github.drain()
        again = _deliver(client, "installation", payload, delivery="install-1")
        assert app.state.github.drain()
        added = _deliver(client, "installation_repositories", {"action": "added", "installation": {"id": 7},
                                                                "repositories_added": _repos("octo/api")})
        assert app.state.github.drain()

    assert first.status_code == 202 and again.status_code == 202 and added.status_code == 202
    assert first.json()["message"] == (
        "Installed on 3 repositories: Pacer makes its labels pacer:priority, pacer:hold and its "
        "github_label triggers' labels where they are missing, in a moment."
    )
    names = {repo: [label["name"] for label in labels] for repo, labels in github.labels.items()}
    assert names == {
        "octo/app": ["pacer:priority", "pacer:hold", "pacer"],
        "octo/web": ["Pacer:Hold", "pacer:priority", "pacer"],
        "octo/locked": [],
        "octo/api": ["pacer:priority", "pacer:hold", "pacer", "agent"],
    }
    assert github.labels["octo/web"][0] == {
        "name": "Pacer:Hold",
        "color": "000000",
        "description": "ours",
    }  # theirs, untouched
    creates = [c for c in github.writes() if c.path.endswith("/labels")]
    # app 3, web 2, locked 1 (its first refusal ends its turn); the redelivery: locked 1 again; api 4.
    assert len(creates) == 3 + 2 + 1 + 1 + 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all(
        w.startswith("github: Pacer's labels were not made on octo/locked: GitHub forbade it (403")
        and w.endswith('create pacer:priority, pacer:hold and pacer there by hand (README, "Connecting GitHub")')
        for w in warnings
    )
    assert not any(r.exc_info for r in caplog.records)


def test_without_credentials_the_answer_says_to_make_them_by_hand(engine: Engine, clock: Any, deferrer: Any) -> None:
    pacer = make_pacer(engine, clock, deferrer)
    payload = {"action": "created", "installation": {"id": 7}, "repositories": _repos("octo/app")}
    with serving(create_app(pacer, start_scheduler=False)) as url, httpx.Client(base_url=url, timeout=10) as client:
        answer = _deliver(client, "installation", payload)
    assert answer.status_code == 200 and "error" not in answer.json()
    assert answer.json()["message"] == (
        "Installed on 1 repository, but Pacer has no GitHub App key or GITHUB_TOKEN to make its labels "
        "pacer:priority and pacer:hold with: create them by hand."
    )
