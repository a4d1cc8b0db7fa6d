"""Seed 000's QUEUE ladder (issue #34, P22 item 6) on the served app over a real SQLite file:
eligible waiters first, then the parked ones by blocker severity, admission order kept inside
each group; one selected waiter's bounded ladder (the front, two on either side, gap counts) in
`why`, the App Home row's menu and the live page; "N ahead" is the earlier ladder entries and the
heading counts the parked."""

from __future__ import annotations

import httpx
import pytest

from bot.chat import answers
from bot.slack.actions import command_for
from bot.slack.blocks import QUEUE_ROW
from scheduler.engine.turns import submit_turn
from tests.support.api_client import TOKEN, Api
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=1, turn_minutes=30),
]


def console(api: Api, text: str, actor: str = "alice") -> answers.Reply:
    return answers.answer(api.pacer, actor, text, surface="console")


def fleet(api: Api) -> dict[str, int]:
    """One running session and ten spot waiters in admission order w1..w10 (precedence 10 down
    to 1): w1 under an operator hold, w2 and w4 held for the one slot, the rest not yet asked."""
    ctx = api.ctx
    ids = {"running": new(ctx, title="running", prompt="long job", scheduling_class="spot")}
    assert submit_turn(ctx, ids["running"], "long job").outcome == "started"
    for n in range(1, 11):
        extra = {"weight": 0.0, "capacity": 3} if n == 7 else {}
        ids[f"w{n}"] = new(ctx, title=f"w{n}", prompt=f"job {n}", scheduling_class="spot", precedence=11 - n, **extra)
    assert console(api, f"hold #{ids['w1']} for 2h freeze").ok
    assert submit_turn(ctx, ids["w1"], "job 1").reason == "operator_hold"
    for name in ("w2", "w4"):
        assert submit_turn(ctx, ids[name], "job").reason == "fleet_at_cap"
    return ids


LADDER = ["w3", "w5", "w6", "w7", "w8", "w9", "w10", "w2", "w4", "w1"]  # eligible, then capacity, then hold


def test_the_queue_lists_eligible_waiters_first_then_parked_by_blocker_severity(api: Api) -> None:
    ids = fleet(api)
    lines = console(api, "queue").text.splitlines()
    assert lines[0] == "Queue: 10 waiting in all · 3 parked"
    waiting = [line.split()[1] for line in lines if "· waiting ·" in line]
    assert waiting == LADDER  # the titles, in ladder order
    for place, name in enumerate(LADDER, start=1):
        line = next(line for line in lines if line.strip().startswith(f"#{ids[name]} "))
        assert f"#{place} of 10 · {place - 1} ahead" in line, line
        assert ("parked" in line) is (name in {"w1", "w2", "w4"}), line
    assert lines[-1].strip().startswith(f"#{ids['running']} running · running")  # a running row keeps its place


def test_why_shows_the_selected_waiters_bounded_ladder_with_gap_counts(api: Api) -> None:
    ids = fleet(api)
    text = console(api, f"why {ids['w4']}").text
    ladder = text[text.index("Queue #"):].splitlines()
    assert ladder[0].startswith("Queue #9 of 10 · 8 ahead · 3 parked — eligible first, then parked by blocker")
    assert ladder[1:] == [
        f"  · #1 #{ids['w3']} w3 p8",
        "  … 5 more …",
        f"  · #7 #{ids['w10']} w10 p1",
        f"  · #8 #{ids['w2']} w2 p9 · parked: capacity",
        f"  ▸ #9 #{ids['w4']} w4 p7 · parked: capacity",
        f"  · #10 #{ids['w1']} w1 p10 · parked: hold",
    ]
    front = console(api, f"why {ids['w3']}").text
    assert "Queue #1 of 10 · 0 ahead · 3 parked" in front
    assert "  … 7 more …" in front and f"  ▸ #1 #{ids['w3']} w3 p8" in front
    middle = console(api, f"why {ids['w7']}").text
    shown = [line for line in middle[middle.index("Queue #"):].splitlines()[1:] if "more" not in line]
    assert [line.split()[1] for line in shown] == ["#1", "#2", "#3", "#4", "#5", "#6"]  # the front, two either side
    assert f"  ▸ #4 #{ids['w7']} w7 c3 p4 w0" in shown and "  … 4 more …" in middle
    assert "Queue #" not in console(api, f"why {ids['running']}").text  # not waiting: no ladder


def test_the_app_home_row_menu_asks_why_and_the_live_page_shows_the_picked_waiters_ladder(api: Api) -> None:
    ids = fleet(api)
    home = answers.answer(api.pacer, "alice", "queue", surface="slack_home")
    menus = [b["accessory"] for b in home.blocks or [] if b.get("accessory", {}).get("action_id") == QUEUE_ROW]
    assert all(menu["options"][0]["value"].startswith("why:") for menu in menus[:-1])  # every waiter; not the running
    assert command_for({"action_id": QUEUE_ROW, "selected_option": {"value": f"why:{ids['w4']}"}}) == f"why {ids['w4']}"

    client = httpx.Client(base_url=api.server.url, timeout=30)
    assert client.get("/", params={"token": TOKEN}).status_code == 303
    page = client.get("/", params={"waiter": ids["w4"]})
    assert page.status_code == 200 and "Queue ladder" in page.text and "#9 of 10 · 8 ahead · 3 parked" in page.text
    assert f'href="?waiter={ids["w2"]}"' in page.text  # each place picks its waiter
    state = client.get("/live/state", params={"waiter": ids["w4"]}).json()
    assert "… 5 more …" in state["sections"]["queue"]
    assert "Queue ladder" not in client.get("/live/state").json()["sections"]["queue"]
    bad = client.get("/live/state", params={"waiter": "abc"})
    assert bad.status_code == 422 and bad.json() == {
        "error": "waiter must be a session id (a whole number from 1), not 'abc'"
    }
    assert client.get("/", params={"waiter": "-3"}).status_code == 422
    assert row(api.ctx, ids["w4"]).status == "waiting"  # reading changed nothing


def test_the_api_gives_a_waiter_its_bounded_ladder(api: Api) -> None:
    ids = fleet(api)
    ladder = api.get(f"/sessions/{ids['w4']}").json()["ladder"]
    assert (ladder["position"], ladder["of"], ladder["ahead"], ladder["parked"]) == (9, 10, 8, 3)
    steps = ladder["steps"]
    assert [s["gap"] or s["place"] for s in steps] == [1, 5, 7, 8, 9, 10]
    assert steps[4] == {"place": 9, "session_id": ids["w4"], "title": "w4", "parked": True, "group": "capacity",
                        "badges": ["p7"], "selected": True, "gap": None}
    assert api.get(f"/sessions/{ids['running']}").json()["ladder"] is None  # not waiting
