"""The `/pacer` grammar: one table row per subcommand form, one per bad argument (the exact
one-line message and the usage line it carries), the time forms against a fixed `now`, and a
fuzz holding `parse` to raising nothing but CommandError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.commands import command as c
from bot.commands import parse
from bot.commands.grammar import GENERAL_USAGE, MAX_CHARS, NAMES, USAGE
from bot.commands.times import (
    After,
    ClockTime,
    Instant,
    parse_duration,
    parse_time,
    parse_when,
    resolve,
)
from scheduler.errors import CommandError, InvalidInput

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
H2 = timedelta(hours=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", c.Help()),
        ("   ", c.Help()),
        ("/pacer", c.Help()),
        ("help", c.Help()),
        ("help rank", c.Help("rank")),
        ("HELP Queue", c.Help("queue")),
        ("queue", c.Queue()),
        ("/pacer queue", c.Queue()),
        ("queue spot", c.Queue(scheduling_class="spot")),
        ("queue priority", c.Queue(scheduling_class="priority")),
        ("queue all", c.Queue(every_status=True)),
        ("queue genesis:slack", c.Queue(genesis="slack")),
        ("queue genesis:GitHub_Issue spot", c.Queue(scheduling_class="spot", genesis="github_issue")),
        ("holds", c.Holds()),
        ("why 42", c.Why(42)),
        ("why #42", c.Why(42)),
        ("promote #7", c.Promote(7)),
        ("demote 7", c.Demote(7)),
        ("demote 7 top", c.Demote(7, top=True)),
        ("rank 12 40", c.Rank(12, "value", precedence=40)),
        ("rank 12 -5", c.Rank(12, "value", precedence=-5)),
        ("rank 12 top", c.Rank(12, "top")),
        ("rank 12 above #3", c.Rank(12, "above", neighbours=(3,))),
        ("rank 12 below 3", c.Rank(12, "below", neighbours=(3,))),
        ("rank 12 between 3 #4", c.Rank(12, "between", neighbours=(3, 4))),
        ("start 9", c.Start(9)),
        ("pause 9", c.Pause(9)),
        ("pause 9 queue", c.Pause(9)),
        ("pause 9 queue halt", c.Pause(9, halt=True)),
        ("pause 9 HALT", c.Pause(9, halt=True)),
        ("pause 9 queue halt with pick up\nthe tests", c.Pause(9, halt=True, resume_prompt="pick up\nthe tests")),
        ("pause 9 with go on", c.Pause(9, resume_prompt="go on")),
        ("pause 9 until 2h with go on", c.Pause(9, until=After(H2), resume_prompt="go on")),
        ("pause 9 until 2h", c.Pause(9, until=After(H2))),
        ("pause 9 until 15:30", c.Pause(9, until=ClockTime(15, 30))),
        ("pause 9 until 2026-11-03T08:00Z", c.Pause(9, until=Instant(datetime(2026, 11, 3, 8, 0, tzinfo=UTC)))),
        ("pause 9 until 2026-11-03 08:00", c.Pause(9, until=Instant(datetime(2026, 11, 3, 8, 0, tzinfo=UTC)))),
        ("archive #9", c.Archive(9)),
        ("stop 9", c.Stop(9)),
        ("STOP #9", c.Stop(9)),
        ("hold 12", c.Hold(c.Selector("session", ("12",)))),
        ("hold #12,13,#12", c.Hold(c.Selector("session", ("12", "13")))),
        ("hold all for 2h deploy freeze", c.Hold(c.Selector("all"), ttl=H2, reason="deploy freeze")),
        ("hold genesis:schedule nightly  noise", c.Hold(c.Selector("genesis", ("schedule",)), reason="nightly  noise")),
        ("hold trigger:#4", c.Hold(c.Selector("trigger", ("4",)))),
        ("hold repo:acme/web-app for 1d", c.Hold(c.Selector("repository", ("acme/web-app",)), ttl=timedelta(days=1))),
        ("hold label:needs-review", c.Hold(c.Selector("label", ("needs-review",)))),
        ("hold class:spot", c.Hold(c.Selector("class", ("spot",)))),
        ("release 3", c.Release(3)),
        ("release #3", c.Release(3)),
        ("resume", c.Resume()),
        ("resume acme/web", c.Resume("acme/web")),
        ("policy", c.PolicyShow()),
        ("policy set gating=off", c.PolicySet((("gating_enabled", False),))),
        (
            "policy set preemption=on reserve_5h=25% reserve_7d=12.5 max_sessions=4",
            c.PolicySet(
                (("preemption_enabled", True), ("reserve_5h_pct", 25.0), ("reserve_7d_pct", 12.5), ("max_sessions", 4))
            ),
        ),
        (
            "policy set override:command=spot override:api=default",
            c.PolicySet((), (("command", "spot"), ("api", None))),
        ),
        ("trigger 3", c.TriggerShow(3)),
        ("trigger #3", c.TriggerShow(3)),
        ("trigger 3 class priority", c.TriggerClass(3, "priority")),
        ("trigger #3 class default", c.TriggerClass(3, None)),
        ("trigger 3 precedence -10", c.TriggerPrecedence(3, -10)),
        ("new fix the flaky test", c.New("fix the flaky test")),
        ("new --rank 40 fix it", c.New("fix it", rank=40)),
        ("new --spot --RANK top fix it", c.New("fix it", spot=True, rank="top")),
        ("new repo:acme/web rank:-3 fix it", c.New("fix it", repository="acme/web", rank=-3)),
        ("new --spot tidy   the\nREADME", c.New("tidy   the\nREADME", spot=True)),
        ("whatif 5", c.WhatIf(session_id=5)),
        ("whatif --spot", c.WhatIf(spot=True)),
        ("reply #5 yes, go ahead", c.ThreadReply(5, "yes, go ahead")),
    ],
)
def test_each_form_parses(text: str, expected: c.Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message", "usage"),
    [
        ("qeue", "'qeue' is not a command; did you mean queue?", GENERAL_USAGE),
        ("frobnicate", "'frobnicate' is not a command; try help", GENERAL_USAGE),
        ("help rnak", "help: 'rnak' is not a command; did you mean rank?", USAGE["help"]),
        ("help rank now", "unexpected argument 'now'", USAGE["help"]),
        (
            "queue urgent",
            "filter: 'urgent' is not a queue filter; use spot, priority, all or genesis:<genesis>",
            USAGE["queue"],
        ),
        ("queue spot all", "filter: give one of spot, priority or all, not both 'spot' and 'all'", USAGE["queue"]),
        (
            "queue genesis:email",
            "genesis: 'email' is not a genesis; use one of command, slack, github_issue, github_label, schedule, "
            "ao_event, api, unknown",
            USAGE["queue"],
        ),
        ("queue genesis:slack genesis:api", "genesis: give genesis:<genesis> once", USAGE["queue"]),
        ("holds all", "unexpected argument 'all'", USAGE["holds"]),
        ("why", "missing session <id>", USAGE["why"]),
        ("why abc", "id: 'abc' is not an id; use a number like 42 or #42", USAGE["why"]),
        ("why 0", "id: '0' is out of range; ids run from 1 to 2147483647", USAGE["why"]),
        ("why 99999999999", "id: '99999999999' is out of range; ids run from 1 to 2147483647", USAGE["why"]),
        ("why 1234567890123", "id: '1234567890123' is not an id; use a number like 42 or #42", USAGE["why"]),
        ("why 4 5", "unexpected argument '5'", USAGE["why"]),
        ("promote", "missing session <id>", USAGE["promote"]),
        ("demote 7 bottom", "option: 'bottom' is not allowed here; the only option is top", USAGE["demote"]),
        ("rank 12", "missing a place: <n>, top, above <id>, below <id> or between <id> <id>", USAGE["rank"]),
        (
            "rank 12 first",
            "place: 'first' is not a place; use a whole number, top, above <id>, below <id> or between <id> <id>",
            USAGE["rank"],
        ),
        (
            "rank 12 2000000000",
            "precedence: '2000000000' must be between -1,000,000,000 and 1,000,000,000",
            USAGE["rank"],
        ),
        ("rank 12 above", "missing <id> after above", USAGE["rank"]),
        ("rank 12 above 12", "above: a session cannot be placed beside itself", USAGE["rank"]),
        ("rank 12 below x", "below: 'x' is not an id; use a number like 42 or #42", USAGE["rank"]),
        ("rank 12 between 3", "missing a second <id> after between", USAGE["rank"]),
        ("rank 12 between 3 3", "between: name two different sessions", USAGE["rank"]),
        ("rank 12 between 12 3", "between: a session cannot be placed beside itself", USAGE["rank"]),
        ("rank 12 top now", "unexpected argument 'now'", USAGE["rank"]),
        ("start", "missing session <id>", USAGE["start"]),
        ("pause 9 later", "mode: 'later' is not allowed here; use until <time> or queue", USAGE["pause"]),
        ("pause 9 until", "missing <time> after until", USAGE["pause"]),
        (
            "pause 9 until soon",
            "until: 'soon' is not a clock time like 15:30 (UTC), a duration like 2h, 90m or 1d, or an ISO-8601 instant",
            USAGE["pause"],
        ),
        (
            "pause 9 until 25:00",
            "until: '25:00' is not a clock time like 15:30 (UTC), a duration like 2h, 90m or 1d, or an ISO-8601 "
            "instant",
            USAGE["pause"],
        ),
        ("pause 9 until 2026-13-01", "until: '2026-13-01' is not a valid date or time", USAGE["pause"]),
        ("pause 9 until 400d", "until: '400d' is longer than 366 days", USAGE["pause"]),
        ("pause 9 until 0m", "until: '0m' must be longer than zero", USAGE["pause"]),
        ("archive", "missing session <id>", USAGE["archive"]),
        ("stop", "missing session <id>", USAGE["stop"]),
        ("stop nine", "id: 'nine' is not an id; use a number like 42 or #42", USAGE["stop"]),
        ("stop 9 now", "unexpected argument 'now'", USAGE["stop"]),
        ("hold", "missing a selector: #id, genesis:, trigger:, repo:, label:, class: or all", USAGE["hold"]),
        (
            "hold everything",
            "selector: 'everything' is not a selector; use #id (comma-separated ok), genesis:<g>, trigger:<id>, "
            "repo:<owner/name>, label:<name>, class:<priority|spot> or all",
            USAGE["hold"],
        ),
        (
            "hold 12,",
            "selector: '12,' is not a selector; use #id (comma-separated ok), genesis:<g>, trigger:<id>, "
            "repo:<owner/name>, label:<name>, class:<priority|spot> or all",
            USAGE["hold"],
        ),
        (
            "hold user:bob",
            "selector: 'user:' is not a selector kind; use genesis:, trigger:, repo:, label: or class:",
            USAGE["hold"],
        ),
        (
            "hold genesis:mail",
            "genesis: 'mail' is not a genesis; use one of command, slack, github_issue, github_label, schedule, "
            "ao_event, api, unknown",
            USAGE["hold"],
        ),
        ("hold trigger:x", "trigger: 'x' is not an id; use a number like 42 or #42", USAGE["hold"]),
        ("hold repo:acme", "repo: 'acme' is not a repository; use owner/name", USAGE["hold"]),
        ("hold class:urgent", "class: 'urgent' is not a class; use priority or spot", USAGE["hold"]),
        (
            "hold label:",
            "label: '' is not a label name; use label:<name> (no commas, 100 characters at most)",
            USAGE["hold"],
        ),
        ("hold all for", "missing <duration> after for", USAGE["hold"]),
        ("hold all for the demo", "for: 'the' is not a duration like 2h, 90m, 1d or 1h30m", USAGE["hold"]),
        ("hold all for 15:30", "for: '15:30' is not a duration like 2h, 90m, 1d or 1h30m", USAGE["hold"]),
        ("release", "missing <hold id>", USAGE["release"]),
        ("release x", "hold id: 'x' is not an id; use a number like 42 or #42", USAGE["release"]),
        ("resume a,b", "group: 'a,b' is not a group name (no commas, 100 characters at most)", USAGE["resume"]),
        ("resume a b", "unexpected argument 'b'", USAGE["resume"]),
        ("policy show", "action: 'show' is not allowed here; use policy, or policy set key=value …", USAGE["policy"]),
        ("policy set", "missing key=value after set", USAGE["policy"]),
        ("policy set gating", "setting: 'gating' is not key=value", USAGE["policy"]),
        (
            "policy set speed=fast",
            "key: 'speed' is not a policy key; use gating, preemption, demand_pacing, overage_spot, reserve_5h, "
            "reserve_7d, max_sessions, top_up, top_up_stretch, top_up_cooldown, override:<genesis>, budget:<runtime>, "
            "reserve:<7d_model>",
            USAGE["policy"],
        ),
        ("policy set gating=maybe", "gating: 'maybe' must be on or off", USAGE["policy"]),
        ("policy set gating=on gating=off", "gating: given twice", USAGE["policy"]),
        ("policy set reserve_5h=120", "reserve_5h: '120' must be a percentage between 0 and 100", USAGE["policy"]),
        ("policy set reserve_7d=-1", "reserve_7d: '-1' must be a percentage between 0 and 100", USAGE["policy"]),
        ("policy set max_sessions=0", "max_sessions: '0' must be between 1 and 10,000", USAGE["policy"]),
        ("policy set max_sessions=ten", "max_sessions: 'ten' is not a whole number", USAGE["policy"]),
        (
            "policy set override:slack=spot",
            "override: slack sessions take their class from their trigger; only api, command, unknown can be "
            "overridden",
            USAGE["policy"],
        ),
        (
            "policy set override:mail=spot",
            "override: 'mail' is not a genesis; use one of command, slack, github_issue, github_label, schedule, "
            "ao_event, api, unknown",
            USAGE["policy"],
        ),
        (
            "policy set override:api=urgent",
            "override:api: 'urgent' is not a class; use priority, spot or default",
            USAGE["policy"],
        ),
        ("policy set override:api=spot override:api=default", "override:api: given twice", USAGE["policy"]),
        ("trigger", "missing trigger <id>", USAGE["trigger"]),
        ("trigger 3 class", "missing a class: priority, spot or default", USAGE["trigger"]),
        (
            "trigger 3 colour red",
            "setting: 'colour' is not a trigger setting; use class or precedence",
            USAGE["trigger"],
        ),
        ("trigger 3 class urgent", "class: 'urgent' is not a class; use priority, spot or default", USAGE["trigger"]),
        ("trigger 3 class", "missing a class: priority, spot or default", USAGE["trigger"]),
        ("trigger 3 precedence high", "precedence: 'high' is not a whole number", USAGE["trigger"]),
        ("new", "missing <prompt>: say what the agent should do", USAGE["new"]),
        ("new --spot", "missing <prompt>: say what the agent should do", USAGE["new"]),
        (
            "new --priority do it",
            "option: '--priority' is not an option; the options are --spot, --cap <usd> and --rank <n>|top",
            USAGE["new"],
        ),
        ("whatif", "missing <id> or --spot", USAGE["whatif"]),
        ("whatif soon", "id: 'soon' is neither a session id (42 or #42) nor --spot", USAGE["whatif"]),
        ("whatif --spot 4", "unexpected argument '4'", USAGE["whatif"]),
        ("reply 5", "missing <text>: the message to send to the session", USAGE["reply"]),
        ("reply x hello", "id: 'x' is not an id; use a number like 42 or #42", USAGE["reply"]),
        ("queue \x00", "command contains the control character '\\x00'; remove it", GENERAL_USAGE),
        ("x" * (MAX_CHARS + 1), f"command is {MAX_CHARS + 1:,} characters; the limit is {MAX_CHARS:,}", GENERAL_USAGE),
    ],
)
def test_each_bad_argument_is_one_line_with_the_usage(text: str, message: str, usage: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse(text)
    assert str(caught.value) == message
    assert caught.value.usage == usage
    assert "\n" not in str(caught.value)


def test_every_subcommand_has_a_usage_and_a_parser() -> None:
    assert set(NAMES) == set(USAGE)
    for name in NAMES:
        with pytest.raises(CommandError) as caught:
            parse(f"{name} \x01")
        assert caught.value.usage == GENERAL_USAGE  # control characters are refused before dispatch


def test_a_long_token_is_cut_in_the_message() -> None:
    with pytest.raises(CommandError) as caught:
        parse("why " + "z" * 500)
    assert (
        str(caught.value) == "id: 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...' is not an id; use a number like 42 or #42"
    )


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("2h", NOW + H2),
        ("90m", NOW + timedelta(minutes=90)),
        ("1d", NOW + timedelta(days=1)),
        ("1h30m", NOW + timedelta(minutes=90)),
        ("15:30", datetime(2026, 11, 2, 15, 30, tzinfo=UTC)),  # later today
        ("08:15", datetime(2026, 11, 3, 8, 15, tzinfo=UTC)),  # already past today: tomorrow
        ("09:00", datetime(2026, 11, 3, 9, 0, tzinfo=UTC)),  # exactly now is not "next"
        ("2026-11-05T12:00:00+02:00", datetime(2026, 11, 5, 10, 0, tzinfo=UTC)),
        ("2026-11-05", datetime(2026, 11, 5, 0, 0, tzinfo=UTC)),
    ],
)
def test_times_resolve_against_the_given_now(token: str, expected: datetime) -> None:
    assert parse_when(token, NOW, field="until") == expected


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("2026-11-01T08:00Z", "until: 2026-11-01 08:00 UTC is in the past"),
        ("2028-01-01", "until: 2028-01-01 00:00 UTC is more than 366 days away"),
    ],
)
def test_a_time_outside_the_window_is_refused(token: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=f"^{message}$"):
        resolve(parse_time(token, field="until"), NOW, field="until")


def test_durations_are_bounded_and_positive() -> None:
    assert parse_duration("366d", field="for") == timedelta(days=366)
    for bad in ("367d", "9000h", "999999d", "0d0h", "h", "2x", "-2h"):
        with pytest.raises(InvalidInput):
            parse_duration(bad, field="for")


TOKENS = [
    *NAMES, "#1", "12", "0", "-3", "#", ",", "12,13", "12,", "top", "above", "below", "between",
    "until", "queue", "for", "2h", "15:30", "24:00", "2026-11-02", "2026-11-02T10:00Z", "set",
    "gating=on", "reserve_5h=200", "max_sessions=0", "override:command=spot", "override:slack=spot",
    "genesis:slack", "genesis:", "class", "precedence", "--spot", "--", "spot", "priority", "all",
    "trigger:3", "repo:a/b", "label:x", "class:spot", "99999999999999", "1h30m", "400d", "0m", "/pacer",
    "=", "key=", "İ", "٣", "²", "\u2028", "\x85",
]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_parse_raises_nothing_but_command_error_for_any_text(text: str) -> None:
    _parse_or_command_error(text)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=8), st.sampled_from([" ", "  ", "\t", "\n"]))
def test_parse_raises_nothing_but_command_error_for_grammar_tokens(words: list[str], sep: str) -> None:
    _parse_or_command_error(sep.join(words))


def _parse_or_command_error(text: str) -> None:
    try:
        result = parse(text)
    except CommandError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert exc.usage in (*USAGE.values(), GENERAL_USAGE)
        return
    assert type(result).__name__ in {cls.__name__ for cls in c.Command.__args__}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("clear", None),  # once `restart`, which re-runs a session: a spelling guess, not a meaning
        ("status", "queue"),  # once `start`
        ("delete", "archive"),  # once `demote`
        ("create", "new"),  # once `resume`
        ("list", "queue"),
        ("halt", "pause"),
        ("unhold", "release"),
        ("retry", "restart"),
        ("promte", "promote"),  # one slip
        ("polciy", "policy"),  # two letters swapped
        ("capcity", "capacity"),
        ("history", None),
        ("exit", None),
    ],
)
def test_an_unknown_command_suggests_only_a_synonym_or_a_typing_slip(typed: str, suggested: str | None) -> None:
    with pytest.raises(CommandError) as refused:
        parse(typed)
    tail = f"did you mean {suggested}?" if suggested else "try help"
    assert str(refused.value) == f"'{typed}' is not a command; {tail}"
