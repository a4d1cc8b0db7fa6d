"""Effects a transaction decides on and performs only after it commits.

A turn is dispatched, an alarm armed or a notice sent only once the row that explains it is
durable: a crash between the two leaves a row the recovery and the hold sweep can repair, never
a running turn or an alarm with no record behind it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from scheduler import alarms
from scheduler.context import Context, request_queue_pass
from scheduler.ports import Outcome, TurnRequest, TurnResult
from templates import render

log = logging.getLogger("pacer.effects")


@dataclass
class Effects:
    dispatch: list[TurnRequest] = field(default_factory=list)
    arm: list[tuple[str, datetime, str, tuple[Any, ...]]] = field(default_factory=list)
    disarm: list[str] = field(default_factory=list)
    halt: list[int] = field(default_factory=list)
    unstarted: list[int] = field(default_factory=list)  # halted before any worker took them: reported HALTED here
    notices: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    queue_pass: bool = False  # after commit, ask for a queue pass: something changed that could free work

    def alarm(self, job_id: str, at: datetime, job: str, *args: Any) -> None:
        self.disarm = [j for j in self.disarm if j != job_id]
        self.arm = [a for a in self.arm if a[0] != job_id]
        self.arm.append((job_id, at, job, args))

    def cancel(self, job_id: str) -> None:
        self.arm = [a for a in self.arm if a[0] != job_id]
        self.disarm.append(job_id)

    def notice(self, event: str, **context: Any) -> None:
        self.notices.append((event, context))

    def apply(self, ctx: Context) -> None:
        for job_id in self.disarm:
            ctx.cancel_alarm(job_id)
        for job_id, at, job, args in self.arm:
            ctx.schedule(job_id, at, job, *args)
        for turn_id in self.halt:
            ctx.ports.workers.halt(turn_id)
        for turn_id in self.unstarted:
            ctx.run_job(
                alarms.TURN_DONE,
                turn_id,
                TurnResult(Outcome.HALTED, error=render("text/runner_error.j2", kind="halted"), extra={"ran": False}),
            )
        for request in self.dispatch:
            # The worker reports the result through the `alarms.TURN_DONE` target (`completion`).
            ctx.ports.workers.submit(request, partial(ctx.run_job, alarms.TURN_DONE, request.turn_id))
        for event, context in self.notices:
            ctx.emit(event, **context)
        if self.queue_pass:
            request_queue_pass(ctx)
