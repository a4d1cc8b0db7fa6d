"""The App Home follows the queue: when a notice says the queue moved, the Homes of the people
who opened theirs recently (`bot.slack.home.recent_viewers`) are published again.

    refresher = HomeRefresher(pacer, publish)      # publish(user_id) -> views.publish
    pacer.ctx.ports.notifier.add(refresher)              # a Notifier: notify(event, context)

A notice only asks for a pass; the pass runs on its own timer thread, never on the thread that
emitted the notice (a scheduler transaction's after-commit, a request). Passes are at most one
every `interval` seconds in this process, so a burst of notices coalesces into one pass at its
start and one after it, and the pass after a burst reads the queue after the last notice: the
final state is always what gets published. A pass publishes one Home after another, and waits
longer before the next when there are many viewers, so the process stays inside Slack's
views.publish budget (Tier 4, about 100 a minute). A failure is one log line; nothing raises
into the scheduler.

Several replicas each republish after the changes they make themselves, so a person can get
one publish per replica per interval; each is bounded, and each shows the state its replica
read after its own change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from bot.runtime.process import Pacer
from bot.slack.home import recent_viewers

log = logging.getLogger("pacer.slack")

# The notices after which a Home may show something else: a session's state, the holds, the order.
QUEUE_EVENTS = frozenset({
    "queued", "held", "started", "paused", "resumed", "done", "failed", "archived", "refused",
    "preempt_released", "demoted_by_exchange", "queue_hold", "queue_hold_lifted", "operator_hold",
    "hold_deadlock", "queue_reordered", "claim_changed",
})
DEFAULT_INTERVAL_SECONDS = 5.0
# A notice's transaction often emits several notices in a row (held, then queue_hold): a short
# wait before the first pass takes them together.
SETTLE_SECONDS = 0.2
PUBLISHES_PER_MINUTE = 100


class HomeRefresher:
    """Republishes recent viewers' Homes after the queue moves, rate-limited and coalesced."""

    def __init__(
        self, pacer: Pacer, publish: Callable[[str], None], *, interval: float = DEFAULT_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pacer = pacer
        self.publish = publish
        self.interval = interval
        self.passes = 0  # how many passes ran (read by tests and logs)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._running: threading.Thread | None = None
        self._asked = False  # a notice came while a pass was running
        self._next_at = float("-inf")  # no pass starts before this
        self._closed = False

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        if event in QUEUE_EVENTS:
            self.request()

    def request(self) -> None:
        """Ask for a pass: now (after SETTLE_SECONDS) if the last one is `interval` old, else
        when it is; nothing more when one is already waiting to start."""
        with self._lock:
            if self._closed:
                return
            if self._running is not None:
                self._asked = True
                return
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            return
        delay = max(SETTLE_SECONDS, self._next_at - self._monotonic())
        self._timer = threading.Timer(delay, self._run)
        self._timer.name = "slack-home-refresh"
        self._timer.daemon = True
        self._timer.start()

    def _run(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            self._running = threading.current_thread()
            self._asked = False
            started = self._monotonic()
        viewers = 0
        try:
            users = recent_viewers(self.pacer, self.pacer.clock.now())
            viewers = len(users)
            for user in users:
                self._publish_one(user)
        except Exception as exc:
            log.warning("slack: the App Home refresh could not read who is looking: %s: %s", type(exc).__name__, exc)
        finally:
            with self._lock:
                self.passes += 1
                self._running = None
                self._next_at = started + max(self.interval, viewers * 60 / PUBLISHES_PER_MINUTE)
                if self._asked and not self._closed:
                    self._asked = False
                    self._arm()

    def _publish_one(self, user: str) -> None:
        try:
            self.publish(user)
        except Exception as exc:
            log.warning("slack: the App Home of %s was not republished: %s: %s", user, type(exc).__name__, exc)

    def close(self, timeout: float = 5.0) -> None:
        """Stop: no new pass starts; a pass under way may finish within `timeout`."""
        with self._lock:
            self._closed = True
            timer, running = self._timer, self._running
            self._timer = None
        if timer is not None:
            timer.cancel()
        if running is not None and running is not threading.current_thread():
            running.join(timeout)
