"""Seed 002, "The holds", row "Blocked interference" (and "Blocked work is not stepped on" in
"How the queue picks the next task"): a candidate whose text overlaps a blocked session's in the
same group is skipped; when every candidate of the group overlaps, the group holds, naming the
blocked session by its title and saying to answer, retry or close it. No Resume."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.engine.lifecycle import archive
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import Refused
from scheduler.holds.interference import overlaps, paths, words
from scheduler.holds.queue import resume_queue
from scheduler.ports import Outcome
from scheduler.wiring import run_periodic
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, finish, holds, holds_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GROUP = "repo:acme/api"


@pytest.mark.parametrize(
    ("text", "other", "expected"),
    [
        # rule 1: a shared file path is enough
        ("Fix validation in src/auth/login.py", "Refactor src/auth/login.py helpers", True),
        ("Fix ./src/auth/login.py", "touch src/auth/login.py.", True),
        ("Bump the version in setup.cfg", "setup.cfg: add a classifier", True),
        ("Edit src/auth/login.py", "Edit src/auth/logout.py", False),
        # rule 2: two shared significant words, at least half of the shorter text's
        ("Fix the login form validation", "Login form shows no validation error", True),
        ("Login form", "Restyle the login form", True),
        ("Fix the login form", "Write the release notes", False),
        ("Login", "Login page redesign", False),  # one shared word is not enough
        (
            "Improve caching of search results and paging of search",
            "search results page: fix paging, caching, sorting, filters, facets, export",
            True,
        ),
        ("Add dark mode to the settings page", "Fix the settings import in the CLI", False),
        ("Edit src/auth/login.py in auth", "Edit src/auth/logout.py for auth", True),  # words outside paths still count
        # stopwords and short words never count
        ("please make sure this works with that", "make sure this also works with those", False),
        ("", "anything at all", False),
    ],
)
def test_the_overlap_rule(text: str, other: str, expected: bool) -> None:
    assert overlaps(text, other) is expected
    assert overlaps(other, text) is expected  # symmetric


def test_paths_and_words_are_normalised() -> None:
    assert paths("See ./SRC/App.py and docs/ and https://x.io/a") == {"src/app.py", "docs/"}
    assert words("The Login-form's VALIDATION, again") == {"login", "form", "validation"}


def _blocked_session(ctx, deferrer, workers) -> int:
    """A session of GROUP that failed with an error a retry cannot fix; its group hold resumed."""
    blocked = new(
        ctx, title="Fix login form", prompt="Fix the validation in src/auth/login.py", concurrency_group=GROUP
    )
    submit_turn(ctx, blocked, "Fix the validation in src/auth/login.py")
    finish(ctx, workers, deferrer, blocked, Outcome.FAILED, error="invalid_request_error")
    resume_queue(ctx, GROUP, actor="U_OPS")  # the task-failed hold lifts: interference is what remains
    deferrer.advance(timedelta(0))
    assert row(ctx, blocked).status == "failed"
    return blocked


def test_seed_002_blocked_interference_skips_an_overlapping_candidate_and_runs_the_rest(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    blocked = _blocked_session(ctx, deferrer, workers)
    overlapping = new(
        ctx, title="Login form errors", prompt="show errors from src/auth/login.py", concurrency_group=GROUP
    )
    unrelated = new(ctx, title="Release notes", prompt="write the release notes", concurrency_group=GROUP)
    elsewhere = new(ctx, title="Login form errors", prompt="src/auth/login.py", concurrency_group="repo:acme/web")

    sub = submit_turn(ctx, overlapping, "show errors from src/auth/login.py")
    assert (sub.outcome, sub.reason) == ("held", "blocked_interference")
    assert sub.sentence == (
        f"Skipped: it overlaps #{blocked} “Fix login form”, failed in the {GROUP} queue, and would likely touch the "
        f"work it left half-done. Answer, retry or close #{blocked} “Fix login form” to continue."
    )
    assert submit_turn(ctx, unrelated, "write the release notes").outcome == "started"  # skipped, not blocking
    assert submit_turn(ctx, elsewhere, "src/auth/login.py").outcome == "started"  # another group: no interference
    assert [h.reason for h in holds(ctx).queue_holds] == []  # not every candidate overlaps: no group hold


def test_seed_002_every_candidate_overlapping_holds_the_group_without_resume(any_engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    blocked = _blocked_session(ctx, deferrer, workers)
    a = new(ctx, title="Login form errors", prompt="show errors from src/auth/login.py", concurrency_group=GROUP)
    b = new(ctx, title="Login form validation tests", prompt="test the login form validation", concurrency_group=GROUP)
    for s in (a, b):
        assert submit_turn(ctx, s, "go").reason == "blocked_interference"
    run_periodic(ctx, "operator_hold_sweep")  # no queue pass was requested: the sweep reports the group hold

    [hold] = holds(ctx).queue_holds
    sentence = (
        f"Every queued session of the {GROUP} queue overlaps work left half-done by #{blocked} “Fix login form” "
        f"(failed), "
        "so none starts. Answer, retry or close it to continue."
    )
    assert (hold.label, hold.group, hold.sentence, hold.resumes_at, hold.resume_offered) == (
        "blocked work",
        GROUP,
        sentence,
        None,
        False,
    )
    text = holds_text(ctx)
    assert f"  blocked work (group {GROUP}) · 2 waiting · since" in text
    assert (
        f"      {sentence}\n      No Resume: it would re-apply at once; it lifts when the blocked work is answered, "
        f"retried or closed."
        in text
    )
    assert [n["hold"].reason for n in heard.of("queue_hold")].count("blocked_interference") == 1
    with pytest.raises(
        Refused,
        match=f"Resume cannot lift the blocked-work hold on group {GROUP}: it would re-apply at once. "
        f"Answer, retry or close #{blocked} “Fix login form” to continue.",
    ):
        resume_queue(ctx, GROUP, actor="U_OPS")

    newcomer = new(ctx, title="Docs", prompt="write docs", concurrency_group=GROUP)
    assert submit_turn(ctx, newcomer, "write docs").outcome == "started"  # the hold is reported, not enforced
    finish(ctx, workers, deferrer, newcomer, Outcome.SUCCESS)

    archive(ctx, blocked, actor="U_OPS")  # closing the blocked session moves the queue by itself
    deferrer.advance(timedelta(0))
    assert row(ctx, a).status == "running"
    assert holds(ctx).queue_holds == []
    assert heard.of("queue_hold_lifted")[-1]["by"] == "the blocked work was answered, retried or closed"


def test_a_person_pressing_start_is_not_gated_by_interference(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    _blocked_session(ctx, deferrer, workers)
    a = new(ctx, title="Login form errors", prompt="src/auth/login.py", concurrency_group=GROUP)
    assert submit_turn(ctx, a, "src/auth/login.py").reason == "blocked_interference"
    assert start_now(ctx, a).submission.outcome == "started"
