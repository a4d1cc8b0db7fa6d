"""Who may do what: the roster, the operator/member split, ownership of sessions and holds, and
the one-line denial naming the role needed."""

from __future__ import annotations

import pytest

from bot.chat.roles import Role, authorize, role_of, subjects
from bot.commands import parse
from scheduler.errors import Forbidden

ROSTER = {"UOP": "operator", "UMEM": "member", "UBAD": "admin"}
OP, MEM = Role.OPERATOR, Role.MEMBER


def test_role_comes_from_the_roster() -> None:
    assert role_of(ROSTER, "UOP") is OP
    assert role_of(ROSTER, "UMEM") is MEM
    assert role_of(ROSTER, "nobody") is None
    assert role_of(ROSTER, "UBAD") is None  # settings refuse this at start-up; here it grants nothing


ALL_FORMS = [
    "help", "queue", "holds", "why 1", "whatif 1", "whatif --spot", "policy",
    "promote 1", "demote 1 top", "rank 1 5", "start 1", "pause 1 until 2h", "archive 1",
    "hold 1", "hold all", "release 3", "resume", "policy set gating=off", "trigger 1 class spot",
    "trigger 1 precedence 3", "new do it", "reply 1 hi",
]


@pytest.mark.parametrize("text", ALL_FORMS)
def test_an_operator_may_do_anything(text: str) -> None:
    authorize(parse(text), "UOP", OP, {1: "someone-else"}, hold_armer="someone-else")


@pytest.mark.parametrize(
    "text", ["help", "queue", "holds", "why 1", "whatif 1", "whatif --spot", "policy", "new do it", "reply 1 hi"]
)
def test_a_member_may_read_create_and_reply_on_any_session(text: str) -> None:
    authorize(parse(text), "UMEM", MEM, {1: "someone-else"})


@pytest.mark.parametrize(
    "text",
    [
        "promote 1",
        "demote 1",
        "rank 1 top",
        "rank 1 between 2 3",
        "start 1",
        "pause 1",
        "archive 1",
        "hold 1",
        "hold 1,#1",
    ],
)
def test_a_member_may_steer_their_own_session(text: str) -> None:
    authorize(parse(text), "UMEM", MEM, {1: "UMEM"})


@pytest.mark.parametrize(
    ("text", "owners", "message"),
    [
        (
            "promote 1",
            {1: "UOTHER"},
            "`promote #1` needs the operator role unless #1 is yours (it was requested by UOTHER); you are a member",
        ),
        (
            "rank 1 above 2",
            {1: None},
            "`rank #1` needs the operator role unless #1 is yours (it has no requester); you are a member",
        ),
        (
            "hold 1,2",
            {1: "UMEM", 2: "UOTHER"},
            "`hold #1, #2` needs the operator role unless #2 is yours (it was requested by UOTHER); you are a member",
        ),
        (
            "hold genesis:schedule",
            {},
            "`hold genesis:schedule` needs the operator role (a member may hold only their own sessions); you are a "
            "member",
        ),
        (
            "hold all",
            {},
            "`hold all` needs the operator role (a member may hold only their own sessions); you are a member",
        ),
        ("policy set gating=off", {}, "`policy set` needs the operator role; you are a member"),
        ("trigger 1 class spot", {}, "`trigger class` needs the operator role; you are a member"),
        ("trigger 1 precedence 2", {}, "`trigger precedence` needs the operator role; you are a member"),
        ("resume", {}, "`resume` needs the operator role; you are a member"),
    ],
)
def test_a_member_is_told_which_role_is_needed(text: str, owners: dict[int, str | None], message: str) -> None:
    with pytest.raises(Forbidden) as caught:
        authorize(parse(text), "UMEM", MEM, owners)
    assert str(caught.value) == message


def test_a_member_releases_only_their_own_hold() -> None:
    authorize(parse("release 3"), "UMEM", MEM, hold_armer="UMEM")
    with pytest.raises(Forbidden) as caught:
        authorize(parse("release 3"), "UMEM", MEM, hold_armer="UOP")
    assert (
        str(caught.value) == "`release 3` needs the operator role: hold 3 was placed by UOP, not you; you are a member"
    )


@pytest.mark.parametrize(
    ("text", "owners", "needed"),
    [
        ("queue", {}, "the member or operator role"),
        ("why 1", {}, "the member or operator role"),
        ("new do it", {}, "the member or operator role"),
        ("promote 1", {1: "UX"}, "the member or operator role"),  # their own session: member would do
        ("promote 1", {1: "UOTHER"}, "the operator role"),
        ("policy set gating=on", {}, "the operator role"),
        ("hold label:x", {}, "the operator role"),
    ],
)
def test_someone_off_the_roster_is_told_which_role_is_needed(
    text: str, owners: dict[int, str | None], needed: str
) -> None:
    with pytest.raises(Forbidden) as caught:
        authorize(parse(text), "UX", None, owners)
    assert str(caught.value).startswith(f"`{text.split()[0]}")
    assert f"needs {needed}; you (UX) are not on the roster" in str(caught.value)
    role = "operator" if needed == "the operator role" else "member"  # never a role that would still be refused
    assert str(caught.value).endswith(f"an operator adds you with PACER_ROSTER=UX={role}")


def test_help_is_open_to_everyone_and_reads_are_open_at_the_console() -> None:
    authorize(parse("help"), "UX", None)
    for text in ("queue", "holds", "why 2", "whatif --spot", "policy"):
        authorize(parse(text), "console", None, open_reads=True)
    with pytest.raises(Forbidden):
        authorize(parse("promote 2"), "console", None, {2: "console"}, open_reads=True)


def test_subjects_are_the_sessions_ownership_decides() -> None:
    assert subjects(parse("rank 4 between 5 6")) == (4,)
    assert subjects(parse("hold 4,5")) == (4, 5)
    assert subjects(parse("hold all")) == ()
    assert subjects(parse("reply 4 hi")) == ()
