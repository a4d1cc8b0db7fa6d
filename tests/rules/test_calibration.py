"""Calibration: seed 001's "Before the first calibration" — a window's dollar capacity once its
spend and utilization are measurable, fraction mode before, and never "$0.00" for no price."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.ports import WindowReading
from scheduler.rules.calibration import (
    MIN_UTILIZATION,
    Observation,
    calibrate,
    is_calibrated,
    is_measurable,
    priced,
    window_sentence,
)

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("rule", "observations", "capacity"),
    [
        ("no observation: fraction mode", [], None),
        ("under 5% utilization is not measurable: fraction mode", [Observation(2.0, 0.04)], None),
        ("no spend is not measurable, however full the window", [Observation(0.0, 0.5)], None),
        ("exactly 5% with spend is measurable: spend / utilization", [Observation(5.0, 0.05)], 100.0),
        ("one measurable observation prices the window", [Observation(30.0, 0.6)], 50.0),
        (
            "several combine by their median",
            [Observation(10.0, 0.2), Observation(30.0, 0.5), Observation(24.0, 0.4)],
            60.0,
        ),
        (
            "the median ignores one wild observation a mean would be dragged by",
            [Observation(10.0, 0.2), Observation(20.0, 0.4), Observation(90.0, 0.1)],
            50.0,
        ),
        (
            "unmeasurable observations are left out, not counted as zero",
            [Observation(0.01, 0.01), Observation(40.0, 0.5)],
            80.0,
        ),
    ],
)
def test_calibrate(rule, observations, capacity) -> None:
    assert calibrate(observations) == (None if capacity is None else pytest.approx(capacity)), rule


def test_the_floor_is_five_percent() -> None:
    assert MIN_UTILIZATION == 0.05
    assert not is_measurable(Observation(1.0, 0.0499))
    assert is_measurable(Observation(1.0, 0.05))


@given(
    st.lists(
        st.tuples(st.floats(0.01, 1000.0), st.floats(MIN_UTILIZATION, 1.5)), min_size=1, max_size=20
    )
)
def test_the_capacity_lies_within_the_observed_prices(pairs) -> None:
    prices = [spent / util for spent, util in pairs]
    capacity = calibrate([Observation(s, u) for s, u in pairs])
    assert capacity is not None
    assert min(prices) * (1 - 1e-9) <= capacity <= max(prices) * (1 + 1e-9)


def window(capacity: float | None, utilization: float = 0.25, spent: float | None = None) -> WindowReading:
    return WindowReading("5h", 5 * 3600, utilization, NOW + timedelta(hours=2), capacity, spent)


def test_priced_adds_dollars_and_the_spend_they_imply() -> None:
    w = priced(window(None, 0.25), 80.0)
    assert (w.capacity_usd, w.spent_usd, w.utilization) == (80.0, 20.0, 0.25)
    assert is_calibrated(w)


def test_priced_without_a_capacity_leaves_the_window_in_fraction_mode() -> None:
    w = window(None)
    assert priced(w, None) is w
    assert not is_calibrated(w)


def test_priced_refuses_a_capacity_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match=r"capacity_usd must be above 0 \(got 0.0\)"):
        priced(window(None), 0.0)


@pytest.mark.parametrize(
    ("rule", "w", "expected"),
    [
        (
            "fraction mode says so and shows no dollars",
            window(None, 0.25),
            "5-hour window: 25.0% used · fraction mode (not calibrated: no dollar figure yet) · resets in 2h 00m "
            "(2026-11-02 11:00 UTC).",
        ),
        (
            "a calibrated window shows dollars of dollars",
            window(80.0, 0.25, 20.0),
            "5-hour window: $20.00 of $80.00 spent (25.0%) · resets in 2h 00m (2026-11-02 11:00 UTC).",
        ),
    ],
)
def test_window_sentence(rule, w, expected) -> None:
    assert window_sentence(w, NOW) == expected, rule


def test_an_uncalibrated_window_at_zero_is_never_rendered_as_zero_dollars() -> None:
    assert "$0.00" not in window_sentence(window(None, 0.0), NOW)
