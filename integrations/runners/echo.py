"""The built-in echo agent: Pacer's default runner, so all of Pacer runs with no account.

A turn "works" for `seconds` (PACER_ECHO_SECONDS), keeping a three-step todo list it tells
`request.on_progress` as Claude Code's TodoWrite would (so the demo shows live progress), then succeeds with `cost_usd`
(PACER_ECHO_COST_USD), an output echoing the prompt's first 200 characters and the attachment
count, and the stable agent session id "echo-<session id>". `halt(turn_id)` wakes a working turn
at once; it answers HALTED with the cost pro-rated to the time it ran, as a real agent stopped
mid-turn has spent part of its bill.

Magic markers in the prompt choose another outcome, so every outcome path (and the queue hold it
causes) can be exercised end to end. A marked turn answers at once and spends nothing, like a
provider refusing the request before any work:

    [echo:fail]               FAILED             an error a retry cannot fix
    [echo:retry]              FAILED_RETRYABLE   a transient failure
    [echo:unreachable]        UNREACHABLE        the provider could not be reached
    [echo:rate-limit]         RATE_LIMITED       no reset stated
    [echo:rate-limit=SECS]    RATE_LIMITED       the provider states a reset SECS from now
    [echo:auth]               AUTH_REJECTED
    [echo:credits]            CREDITS_EXHAUSTED
    [echo:model-access]       MODEL_ACCESS       the plan does not include the chosen model

The first marker in the prompt wins.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import timedelta

from scheduler.clock import SystemClock
from scheduler.ports import Clock, Outcome, TodoItem, TurnProgress, TurnRequest, TurnResult
from templates import render

ECHOED_CHARS = 200
# The echo agent's todo list, one step a third of its turn: (what, as it says it while doing it).
STEPS = (("Read the prompt", "Reading the prompt"), ("Think it over", "Thinking it over"),
         ("Echo the prompt back", "Echoing the prompt back"))
log = logging.getLogger("pacer.runner")

_MARKER = re.compile(r"\[echo:(fail|retry|unreachable|rate-limit|auth|credits|model-access)(?:=(\d+(?:\.\d+)?))?\]")
_OUTCOMES = {
    "fail": Outcome.FAILED,
    "retry": Outcome.FAILED_RETRYABLE,
    "unreachable": Outcome.UNREACHABLE,
    "rate-limit": Outcome.RATE_LIMITED,
    "auth": Outcome.AUTH_REJECTED,
    "credits": Outcome.CREDITS_EXHAUSTED,
    "model-access": Outcome.MODEL_ACCESS,
}


def _tell(request: TurnRequest, doing: int) -> None:
    """Tell `request.on_progress` the echo agent's todo list, `doing` the step in progress, as
    Claude Code's TodoWrite would."""
    if request.on_progress is None:
        return
    todos = tuple(
        TodoItem(content, "completed" if i < doing else "in_progress" if i == doing else "pending", active)
        for i, (content, active) in enumerate(STEPS)
    )
    try:
        request.on_progress(TurnProgress(tool="TodoWrite", todos=todos, tools_used=doing + 1))
    except Exception:  # the turn goes on, as a real agent's would
        log.exception("recording the echo agent's progress failed")


def agent_session_id(session_id: int) -> str:
    return f"echo-{session_id}"


class EchoRunner:
    """Runner port: a pretend agent that takes `seconds` and costs `cost_usd` a turn."""

    def __init__(self, seconds: float, cost_usd: float, *, clock: Clock | None = None) -> None:
        if not seconds >= 0:  # also refuses NaN
            raise ValueError(f"seconds={seconds!r}: must be a number >= 0")
        if not cost_usd >= 0:
            raise ValueError(f"cost_usd={cost_usd!r}: must be a number >= 0")
        self.seconds = float(seconds)
        self.cost_usd = float(cost_usd)
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._working: dict[int, threading.Event] = {}

    def run(self, request: TurnRequest) -> TurnResult:
        marked = _MARKER.search(request.prompt)
        if marked:
            return self._marked(request, marked)
        stop = threading.Event()
        with self._lock:
            if request.turn_id in self._working:
                raise RuntimeError(f"turn {request.turn_id} is already running on the echo agent")
            self._working[request.turn_id] = stop
        started = time.monotonic()
        try:
            halted = False
            for step in range(len(STEPS)):  # a small todo list, so the demo shows live progress
                _tell(request, step)
                halted = stop.wait(self.seconds / len(STEPS))
                if halted:
                    break
        finally:
            with self._lock:
                self._working.pop(request.turn_id, None)
        ran = time.monotonic() - started
        duration_ms = int(ran * 1000)
        if halted:
            share = min(ran / self.seconds, 1.0) if self.seconds > 0 else 1.0
            return TurnResult(
                outcome=Outcome.HALTED,
                cost_usd=round(self.cost_usd * share, 6),
                duration_ms=duration_ms,
                agent_session_id=agent_session_id(request.session_id),
                error=render("text/runner_error.j2", kind="halted"),
            )
        prompt = request.prompt[:ECHOED_CHARS]
        output = render(
            "text/echo_output.j2",
            prompt=prompt,
            truncated=len(request.prompt) > ECHOED_CHARS,
            attachments=len(request.attachments),
        )
        return TurnResult(
            outcome=Outcome.SUCCESS,
            cost_usd=self.cost_usd,
            output=output,
            duration_ms=duration_ms,
            agent_session_id=agent_session_id(request.session_id),
        )

    def halt(self, turn_id: int) -> bool:
        """Wake a working turn; False when the turn is not working here (finished or unknown)."""
        with self._lock:
            stop = self._working.get(turn_id)
        if stop is None:
            return False
        stop.set()
        return True

    def _marked(self, request: TurnRequest, marked: re.Match[str]) -> TurnResult:
        name, seconds = marked.group(1), marked.group(2)
        outcome = _OUTCOMES[name]
        reset_at = None
        if outcome is Outcome.RATE_LIMITED and seconds is not None:
            reset_at = self._clock.now() + timedelta(seconds=float(seconds))
        return TurnResult(
            outcome=outcome,
            agent_session_id=agent_session_id(request.session_id),
            error=render("text/runner_error.j2", kind="echo", outcome=outcome.value, marker=marked.group(0)),
            rate_limit_reset_at=reset_at,
        )


__all__ = ["EchoRunner", "agent_session_id"]
