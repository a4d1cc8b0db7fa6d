"""The ceiling sweep's resume batch as a rule on its own (seed 001, "What brings it back"): how
many spot sessions one sweep gives back, table by table."""

from __future__ import annotations

import pytest

from scheduler.pauses.ceiling import MAX_RESUMES_PER_SWEEP, ResumeBatch


def run(free: int, outcomes: list[str]) -> tuple[int, int, bool, list[bool]]:
    """Walk a sweep: before each candidate ask `has_room`; "ok" resumes on a passed pace,
    "waived" on the idle-fleet waiver, "refused" is the fleet's no. Returns (size, resumed,
    waived, the room answers in order)."""
    batch = ResumeBatch.for_free_slots(free)
    asked = []
    for outcome in outcomes:
        room = batch.has_room()
        asked.append(room)
        if not room:
            continue
        if outcome == "refused":
            batch.refused_by_fleet()
        else:
            batch.resumed_one(pace_waived=outcome == "waived")
    return batch.size, batch.resumed, batch.waived, asked


@pytest.mark.parametrize(
    ("free", "outcomes", "expected"),
    [
        # never more than the free slots
        (2, ["ok", "ok", "ok"], (2, 2, False, [True, True, False])),
        # never more than MAX_RESUMES_PER_SWEEP, however many slots are free
        (50, ["ok"] * 7, (MAX_RESUMES_PER_SWEEP, MAX_RESUMES_PER_SWEEP, False, [True] * 5 + [False] * 2)),
        # no free slot, no resume
        (0, ["ok"], (0, 0, False, [False])),
        (-3, ["ok"], (0, 0, False, [False])),
        # the first went back on the waiver: the batch narrows to one
        (4, ["waived", "ok", "ok"], (1, 1, True, [True, False, False])),
        # a waiver after a passed pace does not narrow it: only the first resume decides
        (4, ["ok", "waived", "ok"], (4, 3, False, [True, True, True])),
        # the fleet refuses one: nobody behind it overtakes
        (4, ["ok", "refused", "ok", "ok"], (4, 1, False, [True, True, False, False])),
    ],
)
def test_the_resume_batch(free: int, outcomes: list[str], expected: tuple[int, int, bool, list[bool]]) -> None:
    assert run(free, outcomes) == expected
