"""What a GitHub delivery asks for after its commit, and doing it (`bot.github.intake` records it).

`record_github` commits, next to the delivery record, only what must be in place before the
webhook answers: the sessions and their prompts, a class change, a hold placed or lifted. The
rest is a `GithubPlan`, done off the request by `finish_github`: announce those holds (and ask
for the queue pass a lifted one may start), submit each first turn, StartNow for promotions,
stops (a closed issue or pull request, a trigger label removed: each session's running turn
halted and the session archived), cost caps, comments and `/pacer` commands.

A burst (a bulk relabel, a script opening issues) is many plans that only create sessions.
`finish_github_plans` decides such a run's first turns together (`scheduler.engine.turns.submit_turns`):
one transaction for the run, where one per session spends its round trips on every commit,
policy read and effect. Any other plan is finished alone, in its place, so a plan's steps still
see every plan recorded before it done.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.github.commands import CommentCommand, run_comment_command, tell_commenter
from bot.github.fixes import FeedbackPlan, finish_feedback, guarded
from bot.runtime.process import Pacer
from integrations.github.status import Where
from scheduler.front import (
    Context,
    Effects,
    announce_holds,
    record_human_message,
    set_cap,
    set_issue_state,
    start_now,
    stop,
    submit_turn,
    submit_turns,
)

log = logging.getLogger("pacer.intake")

COMMENT_SURFACE = "github_comment"


@dataclass
class GithubPlan:
    """What `record_github` decided and committed; what `finish_github` performs afterwards."""

    actor: str = ""
    issue: str = ""  # owner/name#12
    created: list[tuple[int, str]] = field(default_factory=list)  # (session id, first prompt)
    start_now: list[int] = field(default_factory=list)
    archive: list[int] = field(default_factory=list)  # sessions to stop: a running turn halted, then archived
    stop_why: str = "closed"  # closed | unlabeled (`scheduler.engine.lifecycle.stop`)
    stop_label: str | None = None  # the trigger label removed, for unlabeled
    holds_placed: list[tuple[int, int]] = field(default_factory=list)  # (session id, hold id) written with the delivery
    holds_lifted: list[int] = field(default_factory=list)  # hold ids ended with the delivery
    after_commit: Effects = field(default_factory=Effects)  # what those writes ask for once committed
    promoted: list[int] = field(default_factory=list)  # sessions pacer:priority moved
    caps: list[tuple[int, float]] = field(default_factory=list)  # (session id, the cap a pacer:cap-<usd> label names)
    released: list[int] = field(default_factory=list)  # sessions whose label hold ends
    issue_state: str | None = None  # open | closed, for the prerequisites naming the issue
    messages: list[tuple[int, str]] = field(default_factory=list)  # (session id, a trusted comment)
    comment_where: Where | None = None  # where that comment is, to tell its author where it went
    commands: list[CommentCommand] = field(default_factory=list)  # `/pacer …` comments, to run and answer
    feedback: FeedbackPlan = field(default_factory=FeedbackPlan)  # failed checks and reviews on its pull request

    @property
    def created_ids(self) -> list[int]:
        return [sid for sid, _ in self.created]

    @property
    def steered_ids(self) -> list[int]:
        held = [s for s, _ in self.holds_placed]
        return sorted(
            set(self.start_now + self.archive + held + self.promoted + self.released + [s for s, _ in self.caps])
        )

    @property
    def is_empty(self) -> bool:
        return not (
            self.created
            or self.steered_ids
            or self.holds_lifted
            or self.issue_state
            or self.messages
            or self.commands
            or self.feedback
        )

    @property
    def only_creates(self) -> bool:
        """Sessions born (held under `pacer:hold`, perhaps) and nothing else asked."""
        steps = (
            self.start_now,
            self.archive,
            self.holds_lifted,
            self.promoted,
            self.caps,
            self.released,
            self.messages,
            self.commands,
        )
        return (
            not any(steps)
            and not self.feedback
            and self.issue_state is None
            and {s for s, _ in self.holds_placed} <= set(self.created_ids)
        )


def finish_github(pacer_or_ctx: Pacer | Context, plan: GithubPlan) -> None:
    """The slow half, after the commit. Each step stands alone: one failure is logged, not spread.
    A session born under `pacer:hold` is held at its first ask: its hold committed with it.
    `/pacer` commands need the whole runtime (its settings and roster): given only a Context,
    they are logged and not run."""
    ctx = _context_of(pacer_or_ctx)
    _announce_holds(ctx, plan)
    for session_id, prompt in plan.created:
        guarded(f"first turn of session #{session_id}", submit_turn, ctx, session_id, prompt, kind="first")
    for session_id, text in plan.messages:  # trusted already: write access, judged at record time
        spoken = guarded(f"comment on session #{session_id}", record_human_message, ctx, session_id, plan.actor,
                          text, COMMENT_SURFACE, roster=True)
        if spoken is not None and spoken.delivery is not None and plan.comment_where is not None:
            # A turn runs: its author is told whether its agent reads the comment now or after it.
            guarded(f"answer to the comment on #{session_id}", tell_commenter, pacer_or_ctx, plan.comment_where,
                     plan.actor, session_id, spoken.delivery)
    for session_id in plan.start_now:
        guarded(f"start now of session #{session_id}", start_now, ctx, session_id, actor=plan.actor)
    for session_id in plan.archive:
        guarded(f"stop of session #{session_id}", stop, ctx, session_id, actor=plan.actor, why=plan.stop_why,
                 label=plan.stop_label)
    for session_id, cap in plan.caps:
        guarded(f"cost cap of session #{session_id}", set_cap, ctx, session_id, cap, actor=plan.actor)
    if plan.issue_state is not None:
        repository, _, number = plan.issue.rpartition("#")
        guarded(f"state of {plan.issue}", set_issue_state, ctx, repository, int(number), plan.issue_state)
    for command in plan.commands:
        guarded(f"/pacer {command.text} by {command.actor}", run_comment_command, pacer_or_ctx, command)
    if plan.feedback:
        guarded(f"checks and reviews on {plan.issue}", finish_feedback, pacer_or_ctx, plan.feedback)
    _tell_steered(ctx, plan)


def finish_github_plans(pacer_or_ctx: Pacer | Context, plans: Sequence[GithubPlan]) -> None:
    """`finish_github` for each plan, in the order they were recorded, with each run of plans
    that only create sessions finished together: all their holds, then all their first turns in
    one `submit_turns`. Inside such a run the order of the plans' steps cannot matter: each
    step touches only its own plan's new sessions, and a first turn is decided after every
    hold, as it is alone."""
    ctx = _context_of(pacer_or_ctx)
    run: list[GithubPlan] = []
    for plan in plans:
        if plan.only_creates:
            run.append(plan)
            continue
        _create_together(ctx, run)
        run = []
        guarded(f"intake of {plan.issue}", finish_github, pacer_or_ctx, plan)  # one plan's failure is its own
    _create_together(ctx, run)


def _context_of(pacer_or_ctx: Pacer | Context) -> Context:
    return pacer_or_ctx.ctx if isinstance(pacer_or_ctx, Pacer) else pacer_or_ctx


def _create_together(ctx: Context, run: Sequence[GithubPlan]) -> None:
    if len(run) <= 1:
        for plan in run:
            guarded(f"intake of {plan.issue}", finish_github, ctx, plan)
        return
    for plan in run:
        guarded(f"holds of {plan.issue}", _announce_holds, ctx, plan)
    turns = [turn for plan in run for turn in plan.created]
    submissions = guarded(f"first turns of {len(turns)} sessions", submit_turns, ctx, turns, kind="first") or []
    for submission in submissions:
        if submission is not None and submission.outcome == "refused":
            log.info("github: first turn of session #%s: %s", submission.session_id, submission.sentence)
    for plan in run:
        _tell_steered(ctx, plan)


def _announce_holds(ctx: Context, plan: GithubPlan) -> None:
    if plan.holds_placed:
        guarded(
            f"notices of the holds on {plan.issue}", announce_holds, ctx, [hold_id for _, hold_id in plan.holds_placed]
        )
    plan.after_commit.apply(ctx)
    for hold_id in plan.holds_lifted:
        log.warning("operator hold %s released by %s", hold_id, plan.actor)


def _tell_steered(ctx: Context, plan: GithubPlan) -> None:
    for session_id in plan.steered_ids:  # a class or a hold moved: the status comment follows
        ctx.emit("github_control", session_id=session_id, issue=plan.issue, actor=plan.actor)



