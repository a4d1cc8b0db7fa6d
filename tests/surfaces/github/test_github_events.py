"""Reading payloads (pure): routing on event + action, the trust rule, Pacer's own events, and
that no payload — a vendored example or arbitrary JSON — makes `parse` raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.github.events import (
    Control,
    Ignored,
    IntakeEvent,
    Kind,
    is_own,
    is_trusted,
    parse,
    who_acted,
)
from tests.support.github_support import example_payloads, issue_payload
from tests.support.paths import FIXTURES

BOT = "pacer[bot]"


def _parse(event: str, payload: Any) -> IntakeEvent | Ignored:
    return parse(event, payload, bot_login=BOT)


@pytest.mark.parametrize(
    "event, payload, kind, control",
    [
        ("issues", issue_payload("opened"), Kind.GITHUB_ISSUE, None),
        ("issues", issue_payload("labeled", label="pacer"), Kind.GITHUB_LABEL, None),
        ("pull_request", issue_payload("labeled", label="pacer", pull_request=True), Kind.GITHUB_LABEL, None),
        ("issues", issue_payload("labeled", label="Pacer:Priority"), Kind.CONTROL, Control.PRIORITY),
        ("issues", issue_payload("labeled", label="pacer:hold"), Kind.CONTROL, Control.HOLD),
        (
            "pull_request",
            issue_payload("unlabeled", label="pacer:hold", pull_request=True),
            Kind.CONTROL,
            Control.RELEASE,
        ),
        ("issues", issue_payload("unlabeled", label="pacer"), Kind.CONTROL, Control.UNLABEL),
        ("pull_request", issue_payload("unlabeled", label="bug", pull_request=True), Kind.CONTROL, Control.UNLABEL),
        ("issues", issue_payload("closed"), Kind.CONTROL, Control.CLOSE),
        ("pull_request", issue_payload("closed", pull_request=True), Kind.CONTROL, Control.CLOSE),
        ("issues", issue_payload("reopened"), Kind.CONTROL, Control.REOPEN),
    ],
)
def test_routing_on_event_and_action(event: str, payload: dict[str, Any], kind: Kind, control: Control | None) -> None:
    parsed = _parse(event, payload)
    assert isinstance(parsed, IntakeEvent)
    assert (parsed.kind, parsed.control) == (kind, control)
    assert parsed.issue_key == "octo/app#7"
    assert parsed.is_pull_request is (event == "pull_request")


@pytest.mark.parametrize(
    "event, payload, reason",
    [
        ("pull_request", issue_payload("opened", pull_request=True), "pull_request.opened starts nothing"),
        (
            "issues",
            issue_payload("unlabeled", label="pacer:priority"),
            "issues.unlabeled (pacer:priority) starts nothing",
        ),
        ("issues", issue_payload("unlabeled", label="pacer:cap-5"), "issues.unlabeled (pacer:cap-5) starts nothing"),
        ("issues", issue_payload("edited"), "issues.edited starts nothing"),
        (
            "issue_comment",
            {"action": "created", "sender": {"login": "a"}},
            "issue_comment.created carries no issue or repository",
        ),
        (
            "issue_comment",
            {**issue_payload("edited"), "comment": {"body": "hi"}},
            "issue_comment.edited starts nothing",
        ),
        ("discussion_comment", {"action": "created"}, "discussion_comment events start nothing"),
        ("label", {"action": "created"}, "label events start nothing"),
        ("issues", {"action": "opened"}, "issues.opened carries no issue or repository"),
        (
            "issues",
            {**issue_payload(), "issue": {"number": True}},
            "issues.opened carries no issue number or repository name",
        ),
        (
            "issues",
            {**issue_payload(), "repository": {"full_name": "no-slash"}},
            "issues.opened carries no issue number or repository name",
        ),
        ("issues", issue_payload("labeled"), "issues.labeled starts nothing"),
        ("issues", [1, 2], "the payload is not a JSON object"),
    ],
)
def test_what_is_ignored_says_why(event: str, payload: Any, reason: str) -> None:
    assert _parse(event, payload) == Ignored(reason)


@pytest.mark.parametrize(
    "sender, expected",
    [
        ({"login": "pacer[bot]", "type": "Bot"}, True),
        ({"login": "PACER[bot]", "type": "Bot"}, True),
        ({"login": "pacer", "type": "User"}, False),
        ({"login": "renovate[bot]", "type": "Bot"}, False),
        ({}, False),
    ],
)
def test_pacers_own_account(sender: dict[str, str], expected: bool) -> None:
    assert is_own(sender, BOT) is expected
    assert is_own({"login": "pacer[bot]", "type": "Bot"}, "pacer") is True  # the App's name alone
    assert isinstance(_parse("issues", {**issue_payload(), "sender": sender}), Ignored) is expected


@pytest.mark.parametrize(
    "payload, trusted, who",
    [
        (issue_payload("opened", association="OWNER"), True, ("alice", "OWNER")),
        (issue_payload("opened", association="MEMBER"), True, ("alice", "MEMBER")),
        (issue_payload("opened", association="COLLABORATOR"), True, ("alice", "COLLABORATOR")),
        (issue_payload("opened", association="CONTRIBUTOR"), False, ("alice", "CONTRIBUTOR")),
        (issue_payload("opened", association="FIRST_TIME_CONTRIBUTOR"), False, ("alice", "FIRST_TIME_CONTRIBUTOR")),
        (issue_payload("opened", association="NONE"), False, ("alice", "NONE")),
        # Labelling your own issue is judged by your association as its author ...
        (issue_payload("labeled", label="pacer", association="NONE"), False, ("alice", "NONE")),
        (issue_payload("labeled", label="pacer", association="MEMBER"), True, ("alice", "MEMBER")),
        # ... labelling someone else's takes triage access or more, GitHub's own rule ...
        (
            issue_payload("labeled", label="pacer", association="NONE", sender="maintainer"),
            True,
            ("maintainer", "COLLABORATOR"),
        ),
        # ... and another bot's label counts as nobody's.
        (
            issue_payload("labeled", label="pacer", sender="github-actions[bot]", sender_type="Bot"),
            False,
            ("github-actions[bot]", "NONE"),
        ),
        # Closing or reopening withdraws or reports, never starts: no more trust than GitHub asks.
        (issue_payload("closed", association="NONE"), True, ("alice", "NONE")),
        (issue_payload("reopened", association="NONE"), True, ("alice", "NONE")),
    ],
)
def test_the_trust_rule(payload: dict[str, Any], trusted: bool, who: tuple[str, str]) -> None:
    parsed = _parse("issues", payload)
    assert isinstance(parsed, IntakeEvent)
    assert is_trusted(parsed) is trusted
    assert who_acted(parsed) == who


def test_fields_read_from_githubs_own_example() -> None:
    path = FIXTURES / "github" / "issues" / "labeled.payload.json"
    parsed = _parse("issues", json.loads(path.read_text()))
    assert isinstance(parsed, IntakeEvent)
    assert parsed.kind is Kind.GITHUB_LABEL and parsed.label == "bug"
    assert (parsed.repository, parsed.number, parsed.title) == (
        "Codertocat/Hello-World",
        1,
        "Spelling error in the README file",
    )
    assert parsed.url == "https://github.com/Codertocat/Hello-World/issues/1"
    assert parsed.body == "It looks like you accidently spelled 'commit' with two 't's."
    assert (parsed.author, parsed.author_association, parsed.labeler) == ("Codertocat", "OWNER", "Codertocat")
    assert parsed.labels == ("bug",) and parsed.installation_id is None


def test_a_null_body_reads_as_empty() -> None:
    path = FIXTURES / "github" / "pull_request" / "opened.with-null-body.json"
    assert _parse("pull_request", json.loads(path.read_text())) == Ignored("pull_request.opened starts nothing")
    empty = _parse(
        "issues", json.loads((path.parent.parent / "issues" / "opened.with-empty-body.payload.json").read_text())
    )
    assert isinstance(empty, IntakeEvent) and empty.body == ""


@pytest.mark.parametrize("event, path", example_payloads(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_example_parses_without_raising(event: str, path: Path) -> None:
    assert isinstance(_parse(event, json.loads(path.read_text())), IntakeEvent | Ignored)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
_named = (
    st.fixed_dictionaries({}, optional={"name": st.sampled_from(["pacer", "pacer:hold", "pacer:priority"]) | _json})
    | _json
)
_person = st.fixed_dictionaries({}, optional={"login": st.sampled_from(["alice", "pacer[bot]"]) | _json,
                                              "type": st.sampled_from(["User", "Bot"]) | _json}) | _json
_item = st.fixed_dictionaries({}, optional={
    "number": st.integers(-2, 10**12) | _json, "title": _json, "body": _json, "user": _person, "html_url": _json,
    "labels": st.lists(_named, max_size=3) | _json, "author_association": st.sampled_from(["OWNER", "NONE"]) | _json,
    "state": _json, "pull_request": _json,
})
_payload = st.fixed_dictionaries({}, optional={
    "action": st.sampled_from(["opened", "labeled", "unlabeled", "closed", "reopened"]) | _json,
    "issue": _item, "pull_request": _item, "label": _named, "sender": _person,
    "repository": st.fixed_dictionaries({}, optional={"full_name": st.sampled_from(["octo/app", "x"]) | _json}) | _json,
    "installation": st.fixed_dictionaries({}, optional={"id": _json}) | _json,
})


@settings(max_examples=500, deadline=None)
@given(event=st.sampled_from(["issues", "pull_request", "ping", "issue_comment", "push", ""]), payload=_payload | _json)
def test_no_json_makes_parse_raise(event: str, payload: Any) -> None:
    parsed = _parse(event, payload)
    assert isinstance(parsed, IntakeEvent | Ignored)
    if isinstance(parsed, IntakeEvent):
        assert parsed.number >= 1 and "/" in parsed.repository and isinstance(parsed.body, str)


def test_a_pull_requests_own_branch_is_read_and_a_forks_is_not() -> None:
    payload = issue_payload("labeled", label="pacer", pull_request=True, repository="octo/app")
    payload["pull_request"]["head"] = {"ref": "fix-login", "repo": {"full_name": "octo/app"}}
    event = _parse("pull_request", payload)
    assert isinstance(event, IntakeEvent) and event.head_ref == "fix-login"
    payload["pull_request"]["head"] = {"ref": "fix-login", "repo": {"full_name": "someone/app"}}
    fork = _parse("pull_request", payload)
    assert isinstance(fork, IntakeEvent) and fork.head_ref is None
