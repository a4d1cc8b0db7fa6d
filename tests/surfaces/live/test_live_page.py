"""The live page (GET /): who may see it, what it shows, and, in Debian's headless Chromium driven
by Selenium, that it loads without a console error, draws the queue and the charts, and shows a
session created through the API within 5 s."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.live.page import COOKIE
from tests.support.api_client import PERSONAL, TOKEN, Api, make_api

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def api(engine, clock) -> Iterator[Api]:
    api = make_api(engine, clock, max_sessions=1, turn_minutes=30)
    api.quota.spent_5h = 420.0  # something on the chart: $420 of $1,000
    yield api
    api.close()


def create(api: Api, prompt: str, **body: Any) -> dict[str, Any]:
    r = api.post("/sessions", {"prompt": prompt, **body})
    assert r.status_code == 201, r.text
    return r.json()["session"]  # type: ignore[no-any-return]


def signed_in(api: Api) -> httpx.Client:
    client = httpx.Client(base_url=api.server.url, timeout=30)
    first = client.get("/", params={"token": TOKEN})
    assert first.status_code == 303 and first.headers["location"] == "/"
    return client


def test_without_the_token_the_page_says_how_to_get_in(api: Api) -> None:
    bare = httpx.get(f"{api.server.url}/", timeout=30)
    assert (
        bare.status_code == 401
        and "Open /?token=&lt;your API token&gt; once" in bare.text
        and "for 12 hours" in bare.text
    )
    wrong = httpx.get(f"{api.server.url}/", params={"token": "nope"}, timeout=30)
    assert wrong.status_code == 401 and "That token is not valid" in wrong.text
    assert httpx.get(f"{api.server.url}/live/state", timeout=30).status_code == 401


def test_the_token_once_sets_a_strict_httponly_cookie_that_is_not_the_token(api: Api) -> None:
    first = httpx.get(f"{api.server.url}/", params={"token": TOKEN}, timeout=30)
    cookie = first.headers["set-cookie"]
    assert first.status_code == 303 and COOKIE in cookie and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Max-Age=43200" in cookie  # PACER_LIVE_COOKIE_HOURS=12
    bearer = httpx.get(f"{api.server.url}/", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert bearer.status_code == 200


def test_the_cookie_expires_and_the_server_refuses_it_past_its_expiry(api: Api) -> None:
    client = signed_in(api)
    assert client.get("/").status_code == 200 and client.get("/live/state").status_code == 200
    api.pacer.clock.advance(timedelta(hours=12) - timedelta(seconds=1))
    assert client.get("/live/state").status_code == 200
    api.pacer.clock.advance(timedelta(seconds=1))
    # A browser that kept the cookie past its Max-Age (or a copy of it) still sends it: refused.
    assert client.get("/live/state").status_code == 401
    page = client.get("/")
    assert page.status_code == 401 and "Open /?token=" in page.text
    # Its expiry is signed: moving it on is a cookie no key signed.
    expires, mac = client.cookies[COOKIE].split(".")
    client.cookies.set(COOKIE, f"{int(expires) + 86400}.{mac}")
    assert client.get("/live/state").status_code == 401


def test_a_personal_token_opens_the_page_and_its_cookie_ends_with_the_token(engine, clock, request) -> None:
    api = make_api(engine, clock)
    request.addfinalizer(api.close)
    client = httpx.Client(base_url=api.server.url, timeout=30)
    request.addfinalizer(client.close)
    first = client.get("/", params={"token": PERSONAL["bob"]})
    assert first.status_code == 303 and PERSONAL["bob"] not in first.headers["set-cookie"]
    assert client.get("/live/state").status_code == 200
    # The same cookie, served by a Pacer where bob's token is gone, opens nothing.
    without_bob = make_api(engine, clock, PACER_API_TOKENS=f"alice={PERSONAL['alice']}")
    request.addfinalizer(without_bob.close)
    assert (
        httpx.get(
            f"{without_bob.server.url}/live/state", cookies={COOKIE: client.cookies[COOKIE]}, timeout=30
        ).status_code
        == 401
    )
    assert (
        httpx.get(f"{api.server.url}/live/state", cookies={COOKIE: client.cookies[COOKIE]}, timeout=30).status_code
        == 200
    )


def test_the_page_shows_the_card_the_queue_the_holds_and_the_day(api: Api) -> None:
    running = create(api, "running work")
    waiting = create(api, "waiting <b>work</b>")
    client = signed_in(api)
    page = client.get("/")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    html = page.text
    assert f'data-session-id="{running["id"]}"' in html and f'data-session-id="{waiting["id"]}"' in html
    assert "waiting &lt;b&gt;work&lt;/b&gt;" in html  # a title is text, never markup
    assert "A new spot session would" in html and "$420.00 spent of $1,000.00" in html
    assert "starts: 1 ·" in html  # the running session's turn, on the timeline
    state = client.get("/live/state").json()
    assert set(state["sections"]) == {"notices", "card", "queue", "finished", "holds", "timeline", "burn", "updated"}
    five = next(c for c in state["charts"] if c["name"] == "5h")
    assert five["spent"][1] == 420.0 and five["reserve"][0] == five["pacing"][2] and five["pacing"][0] == 0.0
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "live.js", "live.css", "uPlot.LICENSE"):
        assert client.get(f"/static/{name}").status_code == 200, name
    assert client.get("/static/..%2Fapp.py").status_code == 404
    assert client.post("/").status_code == 405  # read-only


def chrome(tmp_path: Path) -> Any:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        if os.environ.get("PACER_REQUIRE_CHROMIUM"):
            pytest.fail(
                f"PACER_REQUIRE_CHROMIUM is set but {CHROMIUM} or {CHROMEDRIVER} is missing: apt-get install chromium "
                f"chromium-driver"
            )
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (CI sets PACER_REQUIRE_CHROMIUM=1 and installs "
            "them)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1600",
                f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_in_chromium_the_page_loads_clean_and_shows_a_new_session_within_5_s(api: Api, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    create(api, "running work")
    create(api, "waiting work")
    browser = chrome(tmp_path)
    try:
        began = time.monotonic()
        browser.get(f"{api.server.url}/?token={TOKEN}")
        assert browser.current_url == f"{api.server.url}/"  # the token left the address bar
        deadline = time.monotonic() + 10
        while not browser.find_elements(By.CSS_SELECTOR, "#charts .uplot canvas") and time.monotonic() < deadline:
            time.sleep(0.05)
        loaded = time.monotonic() - began
        assert len(browser.find_elements(By.CSS_SELECTOR, "#charts .uplot canvas")) == 2, "one chart per window"
        assert len(browser.find_elements(By.CSS_SELECTOR, "#queue tr[data-session-id]")) == 2

        created = create(api, "arrived while watching")
        asked = time.monotonic()
        row = f'#queue tr[data-session-id="{created["id"]}"]'
        while not browser.find_elements(By.CSS_SELECTOR, row) and time.monotonic() - asked < 5:
            time.sleep(0.05)
        seen = time.monotonic() - asked
        assert browser.find_elements(By.CSS_SELECTOR, row), "the new session did not appear within 5 s"
        assert "arrived while watching" in browser.find_element(By.CSS_SELECTOR, row).text
        time.sleep(2.5)  # one more poll: redrawing the charts with new points must stay clean too
        browser.save_screenshot(str(tmp_path / "live-page.png"))
        shot = os.environ.get("PACER_LIVE_SCREENSHOT")  # a copy kept outside the tmp dir, to look at
        if shot:
            shutil.copy(tmp_path / "live-page.png", shot)
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], errors
        print(f"\nlive page: loaded with charts in {loaded:.2f} s; new session shown after {seen:.2f} s; "
              f"screenshot {tmp_path / 'live-page.png'}")
    finally:
        browser.quit()


def test_the_day_holds_every_start_and_the_pauses_and_preemptions_the_rows_keep(any_engine, clock) -> None:
    from datetime import timedelta

    from scheduler.steering.timeline import last_day
    from scheduler.store.db import session_scope
    from scheduler.store.models import Session, Turn
    from tests.support.harness import build, new

    ctx, *_ = build(any_engine, clock)
    now, hour = clock.now(), timedelta(hours=1)
    ran, paused, preempted, long_ago = (new(ctx, title=t) for t in ("ran", "paused", "preempted", "long ago"))
    with session_scope(any_engine) as db:
        for at, kind in ((now - hour, "first"), (now - 25 * hour, "follow_up"), (now - 0.5 * hour, "follow_up")):
            db.add(Turn(session_id=ran, kind=kind, status="done", created_at=at, started_at=at))
        for sid, fields in (
            (paused, {"pause_reason": "at_utilization_limit", "pause_at": now - 2 * hour}),
            (preempted, {"pause_reason": "preempted_by_priority", "pause_at": now - 3 * hour,
                         "last_preempted_at": now - 3 * hour, "preemption_count": 3}),
            (long_ago, {"last_preempted_at": now - 30 * hour, "preemption_count": 1}),
        ):
            row = db.get(Session, sid)
            for name, value in fields.items():
                setattr(row, name, value)
            db.add(row)
    with session_scope(any_engine) as db:
        day = last_day(db, now)
    assert [(m.kind, m.session_id, m.detail) for m in day.marks] == [
        ("preemption", preempted, "3"),  # a preemption's pause is not a second mark
        ("pause", paused, "at_utilization_limit"),
        ("start", ran, "first"),
        ("start", ran, "follow_up"),
    ]
    assert day.offset(now - 12 * hour) == 0.5 and day.offset(now - 30 * hour) == 0.0
