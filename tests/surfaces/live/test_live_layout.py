"""The live page in Debian's headless Chromium at a wall screen's width (1,400 px) and a phone's
(420 px), over a page with something in every section: nothing runs off the side, each part is on
screen and clear of the others, the charts' axes are UTC and 24-hour, and the sign that polling is
alive beats while the server answers and says so when it stops. A full-page screenshot of each
width is kept (PACER_LIVE_SCREENSHOT_DIR keeps a copy to look at)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler.front import Session, Status, Turn, session_scope
from scheduler.store.models import BudgetNotice, PreemptionEvent
from tests.support import harness
from tests.support.api_client import TOKEN, Api, make_api
from tests.surfaces.live.test_live_page import chrome

H = timedelta(hours=1)
WIDTHS = (1400, 420)
PARTS = ("header h1", "#poll", "#notices", "#card", "#windows", "#queue", "#finished", "#holds", "#timeline", "#burn")
TICK = re.compile(r"^(\d{2}:\d{2}( \d{2}-\d{2})?|\d{2}-\d{2})$")  # 14:30, 08:00 11-02, 11-05


@pytest.fixture
def api(engine, clock) -> Iterator[Api]:
    api = make_api(engine, clock, max_sessions=1, turn_minutes=30)
    api.quota.spent_5h = 420.0
    yield api
    api.close()


def busy(api: Api) -> None:
    """A running session asked on an issue, two waiting (one from Slack, with a long title), a
    finished and a failed one, an early notice and a session that keeps being preempted."""
    now = api.pacer.clock.now()
    created = []
    for prompt in ("refactor the billing module", "a very long title " * 8, "triage the flaky tests"):
        r = api.post("/sessions", {"prompt": prompt, "title": prompt.strip()})
        assert r.status_code == 201, r.text
        created.append(int(r.json()["session"]["id"]))
    running, slack, _plain = created
    done, failed = (harness.new(api.ctx, title=t, requester="alice") for t in ("nightly docs", "upgrade the SDK"))
    with session_scope(api.pacer.engine) as db:
        for sid, fields in (
            (running, {"requester": "octocat", "source": {"url": "https://github.com/acme/api/issues/12",
                                                          "repository": "acme/api", "number": 12}}),
            (slack, {"requester": "U0BOB", "source": {"slack": {"channel": "C0OPS", "thread_ts": "1.2"}}}),
            (done, {"status": Status.DONE.value, "created_at": now - 3 * H, "finished_at": now - 2 * H}),
            (failed, {"status": Status.FAILED.value, "created_at": now - 6 * H, "finished_at": now - 5 * H}),
        ):
            row = db.get(Session, sid)
            assert row is not None
            for name, value in fields.items():
                setattr(row, name, value)
            db.add(row)
        db.add(Turn(session_id=done, status="done", cost_usd=2.5, created_at=now - 3 * H, finished_at=now - 2 * H))
        db.add(Turn(session_id=failed, status="failed", error="the agent exited 1: " + "no credentials " * 12,
                    created_at=now - 6 * H, finished_at=now - 5 * H))
        db.add(BudgetNotice(session_id=running, window="5h", runs_out_at=now + 25 * H / 60, resets_at=now + 3 * H,
                            sent_at=now))
        for hours in (5, 3, 1):
            db.add(PreemptionEvent(session_id=done, by_id=running, at=now - hours * H))


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"{what} within {seconds} s")


RECTS = """
return arguments[0].map(function (selector) {
  var e = document.querySelector(selector);
  if (!e) { return [selector, null, false]; }
  var r = e.getBoundingClientRect();
  return [selector, [r.left, r.top + window.scrollY, r.right, r.bottom + window.scrollY],
          getComputedStyle(e).display !== "none" && getComputedStyle(e).visibility !== "hidden"];
});
"""


def layout(browser: Any, width: int) -> dict[str, Any]:
    """Every measurable fact the test holds the page to, at `width`."""
    facts: dict[str, Any] = browser.execute_script("""
      var sections = Array.prototype.slice.call(document.querySelectorAll("main > section"));
      return {
        inner: window.innerWidth,
        scroll: document.documentElement.scrollWidth,
        height: document.documentElement.scrollHeight,
        wide: sections.filter(function (s) { return s.scrollWidth > s.clientWidth + 1; })
          .map(function (s) { return s.id; }),
        canvases: Array.prototype.map.call(document.querySelectorAll("#charts canvas"), function (c) {
          var r = c.getBoundingClientRect(), box = c.closest("section").getBoundingClientRect();
          return [r.left - box.left, box.right - r.right];
        }),
        ticks: Array.prototype.map.call(document.querySelectorAll("#charts .uplot"), function (u) {
          return u.dataset.ticks;
        }),
        cells: Array.prototype.map.call(document.querySelectorAll("#queue tr[data-session-id] td"), function (td) {
          var r = td.getBoundingClientRect();
          return [r.left, r.top, r.right, r.bottom];
        })
      };
    """)
    facts["parts"] = {sel: (rect, shown) for sel, rect, shown in browser.execute_script(RECTS, list(PARTS))}
    # A phone widens its layout viewport to a page wider than the device: that is the page not fitting.
    assert facts["inner"] == width, f"the viewport is {facts['inner']} px, not {width}"
    return facts


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def test_in_chromium_the_page_fits_1400_and_420_px_with_utc_axes_and_a_live_sign(api: Api, tmp_path: Path) -> None:
    busy(api)
    browser = chrome(tmp_path)
    kept = os.environ.get("PACER_LIVE_SCREENSHOT_DIR")
    try:
        browser.get(f"{api.server.url}/?token={TOKEN}")
        for width in WIDTHS:
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
            browser.refresh()
            wait_for(lambda: len(browser.find_elements("css selector", "#charts .uplot canvas")) == 2, 10, "two charts")
            polls = int(wait_for(lambda: int(browser.find_element("css selector", "#poll").get_attribute("data-polls")),
                                 5, "a first poll"))
            facts = layout(browser, width)

            assert facts["scroll"] <= facts["inner"], f"{width} px: the page is {facts['scroll']} px wide"
            assert facts["wide"] == [], f"{width} px: these sections scroll sideways: {facts['wide']}"
            for selector, (rect, shown) in facts["parts"].items():
                assert rect is not None and shown, f"{width} px: {selector} is not shown"
                assert rect[2] - rect[0] > 20 and rect[3] - rect[1] > 10, f"{width} px: {selector} is {rect}"
                assert rect[0] >= 0 and rect[2] <= width, f"{width} px: {selector} runs off the side: {rect}"
            sections = [(s, r) for s, (r, _) in facts["parts"].items() if s.startswith("#") and s != "#poll"]
            clashes = [(a, b) for i, (a, ra) in enumerate(sections) for b, rb in sections[i + 1:] if overlap(ra, rb)]
            assert clashes == [], f"{width} px: these overlap: {clashes}"
            cells = facts["cells"]
            assert not any(overlap(a, b) for i, a in enumerate(cells) for b in cells[i + 1:]), f"{width} px: cells"
            assert all(left >= 0 and right >= 0 for left, right in facts["canvases"]), f"{width} px: a chart spills out"
            labels = [t for ticks in facts["ticks"] for t in (ticks or "").split(" | ")]
            assert len(labels) >= 4 and all(TICK.match(t) for t in labels), f"{width} px: axis labels {labels}"
            if width < 600:  # a phone: each queue row is a card of labelled lines, one above the other
                first = browser.find_element("css selector", "#queue tr[data-session-id] td[data-label='asked by']")
                assert browser.execute_script("return getComputedStyle(arguments[0], '::before').content", first) \
                    == '"asked by: "'

            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": facts["height"],
                                                                         "deviceScaleFactor": 1, "mobile": width < 600})
            time.sleep(0.3)
            shot = tmp_path / f"live-{width}.png"
            browser.save_screenshot(str(shot))
            if kept:
                shutil.copy(shot, Path(kept) / shot.name)
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], errors

        # The sign that polling is alive: it beats again, with the time of the answer in UTC.
        wait_for(lambda: int(browser.find_element("css selector", "#poll").get_attribute("data-polls")) > polls,
                 5, "another poll")
        sign = browser.find_element("css selector", "#poll")
        assert sign.get_attribute("data-state") == "live"
        assert re.fullmatch(r"live · answered \d{2}:\d{2}:\d{2} UTC", sign.text), sign.text

        api.server.stop()  # the server goes away: the sign says so by the next poll
        wait_for(lambda: browser.find_element("css selector", "#poll").get_attribute("data-state") == "lost", 6,
                 "the sign turning to lost")
        sign = browser.find_element("css selector", "#poll")
        assert re.fullmatch(r"no answer since \d{2}:\d{2}:\d{2} UTC · still trying every 2 s", sign.text), sign.text
    finally:
        browser.quit()
