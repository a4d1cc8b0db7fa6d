"""`bot.chat.answers.answer` against a real SQLite database and the real turn engine in virtual time:
each implemented command's answer, its bad-argument and denied-role cases (asserting nothing
changed), the Slack flavour's escaping and Block Kit, and the commands not wired yet."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import select

from bot.chat import answers
from bot.cli import console
from bot.commands import USAGE
from bot.config.settings import load
from bot.runtime.process import Pacer
from integrations.slack.messages import GATE_CARD_BLOCKS
from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, PolicyAudit, QueueHold, Session, Trigger, Turn
from scheduler.store.policy import load_policy
from scheduler.store.ranking import QueueFilter, ranked_queue
from scheduler.store.sessions import NewSession, create_session
from tests.support import harness
from tests.support.harness import T0

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROSTER = "UOP=operator,UMEM=member,UTWO=member"


@pytest.fixture
def pacer(engine, clock) -> Pacer:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2)
    settings = load({"PACER_ROSTER": ROSTER}, toml_path=None)
    return Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)


def add(pacer: Pacer, n: int = 0, **kw: Any) -> int:
    kw.setdefault("requester", "UMEM")
    with session_scope(pacer.engine) as db:
        s = create_session(db, NewSession(**kw), now=T0 + timedelta(seconds=n))
        s.prompt = f"prompt {n}"
        db.add(s)
        db.flush()
        return s.id or 0


def edit(pacer: Pacer, session_id: int, **values: Any) -> None:
    with session_scope(pacer.engine) as db:
        s = db.get(Session, session_id)
        for key, value in values.items():
            setattr(s, key, value)
        db.add(s)


def get(pacer: Pacer, session_id: int) -> Session:
    with session_scope(pacer.engine) as db:
        s = db.get(Session, session_id)
        assert s is not None
        return s


def state(pacer: Pacer) -> list[Any]:
    """Every row Pacer's commands could touch, to assert that a refusal changed nothing."""
    with session_scope(pacer.engine) as db:
        return [
            row.model_dump()
            for model in (Session, Trigger, PolicyAudit, OperatorHold, QueueHold, Turn)
            for row in db.exec(select(model)).all()
        ] + [load_policy(db)]


def ask(pacer: Pacer, text: str, actor: str = "UOP", surface: str = "console") -> answers.Reply:
    return answers.answer(pacer, actor, text, surface=surface)


def refused(pacer: Pacer, text: str, actor: str, message: str, usage: str, surface: str = "console") -> None:
    before = state(pacer)
    reply = ask(pacer, text, actor, surface)
    assert not reply.ok
    assert reply.text == f"error: {message}\nusage: {usage}"
    assert state(pacer) == before


# --------------------------------------------------------------------------- reading


def test_help_lists_every_command_and_how_to_join_the_roster(pacer) -> None:
    reply = ask(pacer, "help", actor="console")
    assert reply.ok
    for usage in USAGE.values():
        assert usage in reply.text
    assert "PACER_ROSTER=console=operator" in reply.text
    assert ask(pacer, "", actor="UMEM").text.endswith("You are UMEM (member).")
    one = ask(pacer, "help rank", actor="UMEM").text
    assert one == "rank <id> <n>|top|above <id>|below <id>|between <id> <id>\n  set a session's place in the spot queue"


def test_queue_ranks_priority_above_spot_with_ladder_pill_and_reason(pacer) -> None:
    a = add(pacer, 0, genesis="slack", title="answer the customer")
    b = add(pacer, 1, genesis="github_issue", title="low", precedence=1)
    c = add(pacer, 2, genesis="github_issue", title="high", precedence=9)
    edit(pacer, b, hold_reason="at_utilization_limit", hold_at=T0, hold_retry_at=T0 + timedelta(minutes=10))
    text = ask(pacer, "queue", actor="UMEM").text
    assert text.splitlines() == [
        "Queue: 3 waiting in all · 1 parked",
        "Priority (1)",
        f"  #{a} answer the customer · waiting · #1 of 3 · 0 ahead · [slack · priority] · p0",
        "Spot, by precedence (2)",
        f"  #{c} high · waiting · #2 of 3 · 1 ahead · [github_issue · spot] · p9",
        f"  #{b} low · waiting · #3 of 3 · 2 ahead · [github_issue · spot] · p1 · parked · held: at the quota limit, "
        f"re-check 2026-11-02 09:10 UTC",
    ]
    spot = ask(pacer, "queue spot", actor="UMEM").text
    assert (
        "Priority" not in spot and f"#{c} high · waiting · #2 of 3 · 1 ahead" in spot
    )  # the ladder ignores the filter
    assert f"#{a}" in ask(pacer, "queue genesis:slack", actor="UMEM").text
    assert f"#{b}" not in ask(pacer, "queue genesis:slack", actor="UMEM").text
    first = ask(pacer, "queue priority", actor="UMEM").text.splitlines()[2]
    assert first == f"  #{a} answer the customer · waiting · #1 of 3 · 0 ahead · [slack · priority] · p0"
    edit(pacer, c, status="running")  # a running row has no place; those behind it move up
    issue = ask(pacer, "queue genesis:github_issue", actor="UMEM").text.splitlines()
    assert issue[2:] == [
        f"  #{c} high · running · [github_issue · spot] · p9",
        f"  #{b} low · waiting · #2 of 2 · 1 ahead · [github_issue · spot] · p1 · parked · held: at the quota limit, "
        f"re-check 2026-11-02 09:10 UTC",
    ]


def test_queue_all_shows_every_status(pacer) -> None:
    done = add(pacer, 0, genesis="github_issue")
    edit(pacer, done, status="done")
    assert f"#{done}" not in ask(pacer, "queue").text
    assert f"#{done} (untitled) · done · [github_issue · spot]" in ask(pacer, "queue all").text


def test_with_nothing_parked_the_ladder_is_the_order_ranked_queue_uses(pacer) -> None:
    from bot.chat.ladder_view import read

    for n in range(12):
        add(pacer, n % 5, genesis=["slack", "github_issue", "schedule"][n % 3], precedence=(n * 7) % 4)
    with session_scope(pacer.engine) as db:
        policy = load_policy(db)
        order = [s.id for s, _ in ranked_queue(db, policy, QueueFilter(statuses=("waiting",)))]
        assert [rung.id for rung in read(db, policy, T0).rungs] == order


def test_queue_in_slack_is_escaped_block_kit_with_row_menus(pacer) -> None:
    spot = add(pacer, 0, genesis="github_issue", title="fix <script> & co")
    prio = add(pacer, 1, genesis="slack", title="urgent")
    reply = ask(pacer, "queue", actor="UMEM", surface="slack")
    assert "fix &lt;script&gt; &amp; co" in reply.text and "<script>" not in reply.text
    assert reply.blocks is not None
    assert reply.blocks[0]["type"] == "header"
    rows = [b for b in reply.blocks if b["type"] == "section"]
    menus = {r["accessory"]["action_id"]: [o["value"] for o in r["accessory"]["options"]] for r in rows[:1]}
    assert menus == {"pacer.queue_row": [f"why:{prio}", f"start:{prio}", f"demote_top:{prio}", f"archive:{prio}"]}
    assert [o["value"] for o in rows[1]["accessory"]["options"]] == [
        f"why:{spot}",
        f"promote:{spot}",
        f"start:{spot}",
        f"archive:{spot}",
    ]
    assert "fix &lt;script&gt; &amp; co" in rows[1]["text"]["text"]


@pytest.mark.parametrize(("surface", "limit"), [("slack", 50), ("slack_home", 100 - GATE_CARD_BLOCKS)])
def test_a_long_queue_is_capped_with_and_n_more(pacer, surface, limit) -> None:
    for n in range(130):
        add(pacer, n, genesis="github_issue")
    reply = ask(pacer, "queue", actor="UMEM", surface=surface)
    assert reply.blocks is not None and len(reply.blocks) == limit
    shown = sum(1 for b in reply.blocks if b["type"] == "section")
    assert reply.blocks[-1]["elements"][0]["text"] == f"…and {130 - shown} more not shown."
    text = ask(pacer, "queue", actor="UMEM").text
    assert text.endswith("…and 80 more not shown.")


def test_holds_lists_queue_holds_operator_holds_and_held_sessions(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue", title="waits")
    edit(
        pacer,
        sid,
        hold_reason="fleet_at_cap",
        hold_at=T0,
        hold_retry_at=T0 + timedelta(minutes=10),
        hold_sentence="Every slot is taken.",
    )
    with session_scope(pacer.engine) as db:
        db.add(
            QueueHold(
                reason="rate_limit",
                sentence="The provider returned a rate limit.",
                since=T0,
                resumes_at=T0 + timedelta(minutes=5),
            )
        )
        db.add(
            OperatorHold(
                selector_kind="genesis", selector_value="schedule", armer="UOP", reason="noisy <cron>", created_at=T0
            )
        )
        db.add(OperatorHold(selector_kind="all", armer="UOP", created_at=T0, expires_at=T0 - timedelta(minutes=1)))
        db.add(OperatorHold(selector_kind="all", armer="UOP", created_at=T0, released_at=T0))
    text = ask(pacer, "holds", actor="UMEM").text
    assert text.splitlines() == [
        "Queue holds",
        "  provider rate limit (whole queue) · 1 waiting · since 2026-11-02 09:00 UTC · Resumes at 2026-11-02 09:05 "
        "UTC",
        "      The provider returned a rate limit.",
        "      Resume: resume",
        "Operator holds",
        "  hold 1 · genesis schedule · by UOP since 2026-11-02 09:00 UTC · until released · noisy <cron>",
        "Held, paused and parked sessions",
        f"  #{sid} waits",
        "      held: every slot taken, re-check 2026-11-02 09:10 UTC (since 2026-11-02 09:00 UTC) — Every slot is taken. "
        "[resumed by its next re-check]",
    ]
    slack = ask(pacer, "holds", actor="UMEM", surface="slack")
    assert "noisy &lt;cron&gt;" in slack.text
    buttons = [b["accessory"] for b in slack.blocks or [] if b.get("accessory", {}).get("type") == "button"]
    assert buttons == [
        {
            "type": "button",
            "action_id": "pacer.hold_release",
            "value": "1",
            "text": {"type": "plain_text", "text": "Release"},
        }
    ]


def test_holds_says_so_when_nothing_holds(pacer) -> None:
    assert ask(pacer, "holds").text == "No holds in force: nothing is holding the queue or any session."


def test_why_names_the_headline_and_the_others_on_the_record(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue", title="stuck")
    edit(pacer, sid, hold_reason="at_utilization_limit", hold_at=T0, hold_retry_at=T0 + timedelta(minutes=10),
         park_reason="auth_outage", park_at=T0 + timedelta(seconds=15))
    lines = ask(pacer, f"why #{sid}", actor="UMEM").text.splitlines()
    assert lines[0] == f"#{sid} stuck · waiting · [github_issue · spot] · p0"
    assert lines[1] == "Waiting because parked: the provider's sign-in is failing (since 2026-11-02 09:00 UTC) [resumed by the un-park sweep]"
    assert lines[2].startswith("Also on the record, and not why it is waiting now: held: at the quota limit")
    assert "it is queued and waits only for its turn in the queue." in ask(pacer, f"why {add(pacer, 1)}").text
    refused(pacer, "why 999", "UMEM", "session #999 does not exist", USAGE["why"])
    refused(pacer, "why x", "UMEM", "id: 'x' is not an id; use a number like 42 or #42", USAGE["why"])


def test_reads_need_the_roster_on_slack_but_not_at_the_console(pacer) -> None:
    add(pacer, 0)
    reply = ask(pacer, "queue", actor="USTRANGER", surface="slack")
    assert not reply.ok
    assert reply.text == (
        ":warning: `queue` needs the member or operator role; you (USTRANGER) are not on the roster — "
        "an operator adds you with PACER_ROSTER=USTRANGER=member\n"
        "usage: `/pacer queue [spot|priority|all] [genesis:&lt;genesis&gt;]`"
    )
    assert ask(pacer, "queue", actor="USTRANGER", surface="console").ok
    assert ask(pacer, "help", actor="USTRANGER", surface="slack").ok


# --------------------------------------------------------------------------- steering


def test_promote_makes_priority_and_starts_it_now(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue", title="mine")
    reply = ask(pacer, f"promote {sid}", actor="UMEM")
    assert (
        reply.text
        == f"#{sid} mine is now priority (was spot): the spot gate no longer holds it.\n#{sid} started now — its first turn."
    )
    s = get(pacer, sid)
    assert (s.scheduling_class, s.status) == ("priority", "running")
    assert ask(pacer, f"promote {sid}", actor="UMEM").text == f"#{sid} mine is already priority; nothing changed."


def test_promote_refusals_change_nothing(pacer) -> None:
    theirs = add(pacer, 0, genesis="github_issue", requester="UTWO")
    refused(
        pacer,
        f"promote {theirs}",
        "UMEM",
        f"`promote #{theirs}` needs the operator role unless #{theirs} is yours (it was requested by UTWO); you are a "
        f"member",
        USAGE["promote"],
    )
    refused(pacer, "promote", "UMEM", "missing session <id>", USAGE["promote"])
    refused(pacer, "promote 4242", "UOP", "session #4242 does not exist", USAGE["promote"])
    edit(pacer, theirs, status="done")
    refused(
        pacer,
        f"promote {theirs}",
        "UOP",
        f"#{theirs} is done; only unfinished sessions can be promoted",
        USAGE["promote"],
    )


def test_demote_top_lands_above_the_spot_queue(pacer) -> None:
    add(pacer, 0, genesis="github_issue", precedence=30)
    sid = add(pacer, 1, genesis="slack", title="chat")
    assert (
        ask(pacer, f"demote {sid} top", actor="UMEM").text
        == f"#{sid} chat is now spot (was priority), at the head of the spot queue with precedence 35."
    )
    assert ask(pacer, f"demote {sid}", actor="UMEM").text.startswith(f"#{sid} chat is already spot; nothing changed.")
    refused(
        pacer,
        f"demote {sid} bottom",
        "UMEM",
        "option: 'bottom' is not allowed here; the only option is top",
        USAGE["demote"],
    )
    refused(
        pacer,
        f"demote {sid}",
        "UTWO",
        f"`demote #{sid}` needs the operator role unless #{sid} is yours (it was requested by UMEM); you are a member",
        USAGE["demote"],
    )


def test_rank_by_value_top_and_neighbours(pacer) -> None:
    hi = add(pacer, 0, genesis="github_issue", precedence=21)
    lo = add(pacer, 1, genesis="github_issue", precedence=20)
    me = add(pacer, 2, genesis="github_issue", precedence=0, title="me")
    assert ask(pacer, f"rank {me} 7", actor="UMEM").text == f"#{me} me: precedence 0 → 7, now #3 in the queue."
    assert ask(pacer, f"rank {me} top", actor="UMEM").text == f"#{me} me: precedence 7 → 26, now #1 in the queue."
    # Dropped between adjacent 21 and 20: the neighbours are nudged to 22 and 19.
    text = ask(pacer, f"rank {me} between {lo} {hi}", actor="UMEM").text
    assert text.splitlines() == [
        f"#{me} me: precedence 26 → 20, now #2 in the queue.",
        f"#{hi} was nudged to 22 to make room.",
        f"#{lo} was nudged to 19 to make room.",
    ]
    ask(pacer, f"rank {me} below {lo}", actor="UMEM")
    assert get(pacer, me).precedence == 14
    ask(pacer, f"rank {me} above {hi}", actor="UMEM")
    assert get(pacer, me).precedence == 27


def test_rank_refusals_change_nothing(pacer) -> None:
    me = add(pacer, 0, genesis="github_issue")
    prio = add(pacer, 1, genesis="slack")
    other = add(pacer, 2, genesis="github_issue", requester="UTWO")
    refused(
        pacer,
        f"rank {me} above {prio}",
        "UMEM",
        f"above: #{prio} is not in the spot queue (it is waiting, priority); name a queued spot session",
        USAGE["rank"],
    )
    refused(pacer, f"rank {me} below 999", "UMEM", "session #999 does not exist", USAGE["rank"])
    refused(
        pacer,
        f"rank {other} 5",
        "UMEM",
        f"`rank #{other}` needs the operator role unless #{other} is yours (it was requested by UTWO); you are a "
        f"member",
        USAGE["rank"],
    )
    refused(
        pacer,
        f"rank {me} first",
        "UMEM",
        "place: 'first' is not a place; use a whole number, top, above <id>, below <id> or between <id> <id>",
        USAGE["rank"],
    )
    assert ask(pacer, f"rank {other} 5", actor="UOP").ok  # an operator ranks any session


def test_archive_is_the_engine_archive_on_every_status_but_archived(pacer) -> None:
    sid = add(pacer, 0, title="old")
    assert ask(pacer, f"archive {sid}", actor="UMEM").text == f"#{sid} old is archived and has left the queue."
    assert get(pacer, sid).status == "archived"
    refused(pacer, f"archive {sid}", "UOP", f"session #{sid} is already archived", USAGE["archive"])
    running = add(pacer, 1)
    edit(pacer, running, status="running")
    assert ask(pacer, f"archive {running}", actor="UOP").ok  # the same archive the API's Trash posts to
    assert get(pacer, running).status == "archived"
    theirs = add(pacer, 2, requester="UTWO")
    refused(
        pacer,
        f"archive {theirs}",
        "UMEM",
        f"`archive #{theirs}` needs the operator role unless #{theirs} is yours (it was requested by UTWO); you are a "
        f"member",
        USAGE["archive"],
    )
    refused(pacer, "archive #", "UMEM", "id: '#' is not an id; use a number like 42 or #42", USAGE["archive"])


def test_trigger_class_reports_how_many_moved_and_starts_the_promoted(pacer) -> None:
    with session_scope(pacer.engine) as db:
        db.add(Trigger(name="nightly", kind="schedule", created_at=T0))
    waiting = add(pacer, 0, genesis="schedule", trigger_id=1)
    add(pacer, 1, genesis="schedule", trigger_id=1, scheduling_class="spot")  # chosen by hand: left alone
    lines = ask(pacer, "trigger 1 class priority").text.splitlines()
    assert lines == [
        "Trigger 1 (nightly): class default → priority.",
        f"1 waiting session took the new class; 1 moved between priority and spot (#{waiting} now priority).",
        "Each is started now, as Start now would; one that is paused or parked keeps waiting for its own resume.",
    ]
    assert get(pacer, waiting).status == "waiting"  # the release alarm starts it, once the change committed
    pacer.deferrer.advance(timedelta(0))
    assert get(pacer, waiting).status == "running"
    reply = ask(pacer, "trigger 1 class priority")
    assert (
        reply.text.splitlines()[1]
        == "No waiting session carried its class: sessions moved by hand, running or finished keep theirs."
    )
    refused(
        pacer,
        "trigger 1 class spot",
        "UMEM",
        "`trigger class` needs the operator role; you are a member",
        USAGE["trigger"],
    )
    refused(pacer, "trigger 9 class spot", "UOP", "trigger #9 does not exist", USAGE["trigger"])
    refused(
        pacer,
        "trigger 1 class urgent",
        "UOP",
        "class: 'urgent' is not a class; use priority, spot or default",
        USAGE["trigger"],
    )


def test_trigger_precedence_applies_to_its_next_sessions(pacer) -> None:
    with session_scope(pacer.engine) as db:
        db.add(Trigger(name="labels", kind="github_label", created_at=T0))
    assert ask(pacer, "trigger 1 precedence 15").text.startswith("Trigger 1 (labels): precedence unset → 15.")
    assert get(pacer, add(pacer, 0, genesis="github_label", trigger_id=1)).precedence == 15
    refused(
        pacer,
        "trigger 1 precedence 3",
        "UMEM",
        "`trigger precedence` needs the operator role; you are a member",
        USAGE["trigger"],
    )
    refused(pacer, "trigger 1 precedence high", "UOP", "precedence: 'high' is not a whole number", USAGE["trigger"])


def test_policy_shows_and_an_operator_sets_it_with_one_audit_line(pacer) -> None:
    shown = ask(pacer, "policy", actor="UMEM").text
    assert shown.startswith("Spot gate: ON")
    assert "Decision for a new spot session: starts now (inside the budget, the pace and the slots)" in shown and "Account pool: Work is not blocked" in shown
    assert "  gating: on" in shown and "  max_sessions: 2" in shown and "genesis overrides: none" in shown
    reply = ask(pacer, "policy set gating=off reserve_5h=25 override:command=spot", actor="UOP", surface="slack")
    assert reply.ok and reply.in_channel
    assert reply.text.startswith(
        "*Policy changed:* gating_enabled on → *off*, reserve_5h_pct 20 → *25*, genesis_class_overrides none → "
        "*command=spot*."
    )
    with session_scope(pacer.engine) as db:
        audits = db.exec(select(PolicyAudit).order_by(PolicyAudit.id)).all()  # type: ignore[arg-type]
        policy = load_policy(db)
    assert (audits[-1].surface, audits[-1].actor) == ("slack:/pacer", "UOP")
    assert audits[-1].line == (
        "[FleetPolicy] changed via slack:/pacer by UOP: gating_enabled on -> off, reserve_5h_pct 20 -> 25, "
        "genesis_class_overrides {} -> {'command': 'spot'}"
    )
    assert (
        not policy.gating_enabled
        and str(policy.overrides) == "{<Genesis.COMMAND: 'command'>: <SchedulingClass.SPOT: 'spot'>}"
    )
    again = ask(pacer, "policy set gating=off", actor="UOP")
    assert again.text == "Nothing changed: those values are already in force." and not again.in_channel
    ask(pacer, "policy set override:command=default", actor="UOP")
    assert "genesis overrides: none" in ask(pacer, "policy").text
    console_audit = ask(pacer, "policy set max_sessions=3", actor="UOP").text
    assert console_audit.endswith("Recorded: [FleetPolicy] changed via console by UOP: max_sessions 2 -> 3")


def test_policy_set_refusals_change_nothing(pacer) -> None:
    refused(
        pacer,
        "policy set gating=off",
        "UMEM",
        "`policy set` needs the operator role; you are a member",
        USAGE["policy"],
    )
    refused(
        pacer,
        "policy set gating=off",
        "console",
        "`policy set` needs the operator role; you (console) are not on the roster — an operator adds you with "
        "PACER_ROSTER=console=operator",
        USAGE["policy"],
    )
    refused(
        pacer,
        "policy set reserve_7d=101",
        "UOP",
        "reserve_7d: '101' must be a percentage between 0 and 100",
        USAGE["policy"],
    )
    refused(
        pacer,
        "policy set gating=off speed=3",
        "UOP",
        "key: 'speed' is not a policy key; use gating, preemption, demand_pacing, overage_spot, reserve_5h, reserve_7d, "
        "max_sessions, top_up, top_up_stretch, "
        "top_up_cooldown, override:<genesis>, budget:<runtime>, reserve:<7d_model>",
        USAGE["policy"],
    )


# --------------------------------------------------------------------------- the engine's commands


def test_start_takes_the_session_now(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue")
    assert ask(pacer, f"start {sid}", actor="UMEM").text == f"#{sid} started now — its first turn."
    assert get(pacer, sid).status == "running"
    theirs = add(pacer, 1, requester="UTWO")
    refused(
        pacer,
        f"start {theirs}",
        "UMEM",
        f"`start #{theirs}` needs the operator role unless #{theirs} is yours (it was requested by UTWO); you are a "
        f"member",
        USAGE["start"],
    )
    refused(pacer, "start soon", "UMEM", "id: 'soon' is not an id; use a number like 42 or #42", USAGE["start"])


def test_pause_until_sleeps_the_session(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue")
    text = ask(pacer, f"pause {sid} until 2h", actor="UMEM").text
    assert text.startswith(f"#{sid} sleeps until 2026-11-02 11:00 UTC")
    assert get(pacer, sid).wake_at == T0 + timedelta(hours=2)
    refused(
        pacer,
        f"pause {sid} until 2026-01-01T00:00Z",
        "UMEM",
        "until: 2026-01-01 00:00 UTC is in the past",
        USAGE["pause"],
    )
    refused(
        pacer,
        f"pause {sid} until never",
        "UMEM",
        "until: 'never' is not a clock time like 15:30 (UTC), a duration like 2h, 90m or 1d, or an ISO-8601 instant",
        USAGE["pause"],
    )


def test_new_creates_a_command_session_for_the_actor(pacer) -> None:
    text = ask(pacer, "new --spot tidy the README\nand the docs", actor="UMEM").text
    with session_scope(pacer.engine) as db:
        s = db.exec(select(Session)).one()
    assert (s.genesis, s.scheduling_class, s.requester, s.title, s.prompt) == (
        "command",
        "spot",
        "UMEM",
        "tidy the README",
        "tidy the README\nand the docs",
    )
    assert text.splitlines() == [
        f"Created #{s.id} tidy the README · [command · spot] · p5, at the top of the spot queue.",
        "It started now.",
    ]
    refused(pacer, "new", "UMEM", "missing <prompt>: say what the agent should do", USAGE["new"])
    refused(
        pacer,
        "new do it",
        "USTRANGER",
        "`new` needs the member or operator role; you (USTRANGER) are not on the roster — an operator adds you with "
        "PACER_ROSTER=USTRANGER=member",
        USAGE["new"],
    )


def test_whatif_answers_without_changing_anything(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue")
    before = state(pacer)
    reply = ask(pacer, f"whatif {sid}", actor="UMEM")
    assert reply.ok and reply.text.startswith(f"#{sid} (spot) would start now — nothing was changed by asking.")
    pacer.ctx.ports.quota.spend_out()
    held = ask(pacer, "whatif --spot", actor="UMEM").text
    assert held.startswith("A new spot session would not start now")
    assert state(pacer) == before
    refused(
        pacer, "whatif later", "UMEM", "id: 'later' is neither a session id (42 or #42) nor --spot", USAGE["whatif"]
    )


def test_release_of_someone_elses_hold_is_denied_before_anything_runs(pacer) -> None:
    with session_scope(pacer.engine) as db:
        db.add(OperatorHold(selector_kind="all", armer="UOP", created_at=T0))
    refused(
        pacer,
        "release 1",
        "UMEM",
        "`release 1` needs the operator role: hold 1 was placed by UOP, not you; you are a member",
        USAGE["release"],
    )
    refused(pacer, "release 7", "UMEM", "hold 7 does not exist", USAGE["release"])


def test_a_crashing_handler_is_one_line_and_no_trace(pacer, monkeypatch, caplog) -> None:
    def boom(ctx: Any, command: Any) -> Any:
        raise RuntimeError("kaboom")

    monkeypatch.setitem(answers.ENGINE, "reply", boom)
    reply = ask(pacer, f"reply {add(pacer, 0)} hi", actor="UMEM")
    assert (reply.ok, reply.text) == (
        False,
        "Something went wrong answering that; nothing was reported as done. The details are in Pacer's log.",
    )
    assert "kaboom" in caplog.text


def test_an_unreadable_database_is_one_line_and_no_trace(pacer) -> None:
    from sqlalchemy import text

    with pacer.engine.begin() as conn:
        conn.execute(text("ALTER TABLE sessions RENAME TO sessions_gone"))
    reply = ask(pacer, "queue", actor="UMEM", surface="slack")
    assert (reply.ok, reply.text) == (
        False,
        "Pacer could not read its database just now; nothing changed. Try again in a moment.",
    )


def test_an_engine_handler_answers_from_the_table(pacer, monkeypatch) -> None:
    from bot.chat.context import Answer

    assert answers.available("resume")
    monkeypatch.setitem(
        answers.ENGINE, "resume", lambda ctx, command: Answer("started", {"sentence": f"resumed {command.group}"})
    )
    assert ask(pacer, "resume acme/web").text == "resumed acme/web"


# --------------------------------------------------------------------------- the console


def test_the_console_answers_with_the_text_templates(pacer) -> None:
    sid = add(pacer, 0, genesis="github_issue")
    assert console.answer(pacer, f"why {sid}", user="console").startswith(f"#{sid} (untitled) · waiting")
    assert console.answer(pacer, f"promote {sid}", user="console").startswith("error: `promote #")


def test_run_console_reads_lines_until_quit(tmp_path) -> None:
    settings = load(
        {"DATABASE_URL": f"sqlite:///{tmp_path}/console.db", "PACER_ROSTER": "console=operator"}, toml_path=None
    )
    out = io.StringIO()
    assert (
        console.run_console(settings, stdin=io.StringIO("queue\n\npolicy set gating=off\nquit\nqueue\n"), stdout=out)
        == 0
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == "Pacer console as console (operator). Type help, or quit."
    assert lines[1] == "Queue: 0 waiting in all"
    assert lines[-2].startswith("Policy changed: gating_enabled on → off.")
    assert lines[-1] == "Recorded: [FleetPolicy] changed via console by console: gating_enabled on -> off"


def test_a_hold_on_class_spot_makes_every_surface_say_a_new_spot_session_would_wait(pacer) -> None:
    """P17, one admission verdict: the gate admits, but an operator hold on class:spot holds a new
    spot session; `whatif --spot`, the gate card (`policy`, the live page, the API's dict) and a
    real `new --spot` all say the same thing, because they ask the same verdict."""
    from bot.live import page as live_page
    from bot.live import view as live_view
    from scheduler.wiring import install

    install(pacer.ctx)  # the production admission checks, in their production order
    with session_scope(pacer.engine) as db:
        db.add(
            OperatorHold(selector_kind="class", selector_value="spot", armer="UOP", reason="quiet hours", created_at=T0)
        )
    said = ask(pacer, "whatif --spot", actor="UMEM").text
    assert said.startswith("A new spot session would not start now"), said
    view = live_view.read(pacer)
    assert view.card.decision.allowed and not view.card.admitted  # the gate alone would admit it
    assert view.card.as_dict()["admission"]["allowed"] is False
    assert view.card.as_dict()["admission"]["held_by"]["reason"] == "operator_hold"
    page = live_page.sections(view)["card"]
    assert "A new spot session would wait" in page and "would start" not in page
    assert "it would wait, " in ask(pacer, "policy", actor="UMEM").text
    created = ask(pacer, "new --spot tidy the README", actor="UMEM").text
    assert "It started now." not in created
    with session_scope(pacer.engine) as db:
        row = db.exec(select(Session)).one()
    assert (row.status, row.hold_reason) == ("waiting", "operator_hold")
