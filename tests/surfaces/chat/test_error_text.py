"""`error_text`: the sentences errors carry, one file of macros per module under templates/errors/."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from jinja2 import UndefinedError

from templates import environment, error_text
from tests.support.paths import ROOT

ERRORS = ROOT / "templates" / "errors"


@pytest.mark.parametrize("path", sorted(ERRORS.glob("*.j2")), ids=lambda p: p.stem)
def test_every_error_file_compiles(path: Path) -> None:
    assert environment().get_template(f"errors/{path.name}").module is not None


@pytest.mark.parametrize(
    ("name", "context", "sentence"),
    [
        ("sessions/not_found", {"session_id": 7}, "session #7 does not exist"),
        ("sessions/weight_range", {"max_weight": 10000.0}, "weight: must be a finite number >= 0, at most 10,000"),
        (
            "sessions/genesis_unknown",
            {"genesis": "x", "allowed": ["api", "command"]},
            "genesis: 'x' is not a genesis kind; use one of api, command",
        ),
        (
            "operator_holds/already_released",
            {"hold_id": 3, "by": None, "at": datetime(2026, 12, 1, 15, 30, tzinfo=UTC)},
            "hold 3 was already released by someone at 2026-12-01 15:30 UTC",
        ),
        (
            "bounds/unstorable_text",
            {"code": 0xD801, "position": 4},
            "contains a lone UTF-16 surrogate (U+D801) at position 4; text may hold neither NUL nor lone surrogates",
        ),
        (
            "queue_holds/nothing_held",
            {"group": None},
            "nothing to resume: no queue hold is in force on the whole queue",
        ),
        (
            "simulate_scenario/not_number",
            {"where": "policy.reserve_5h_pct", "low": 0.0, "high": 100, "above": False, "value": 120},
            "policy.reserve_5h_pct: must be a number >= 0 and <= 100 (got 120)",
        ),
        (
            "simulate_scenario/not_instant",
            {"where": "arrivals[0].at", "value": "2026-11-02T03:00:00", "offset_missing": True},
            "arrivals[0].at: must be +<duration> from the start (e.g. +90m) or an ISO-8601 instant with an offset"
            " (got '2026-11-02T03:00:00', which has no offset)",
        ),
        ("simulate/nothing_recorded", {"since": None}, "--from-db: the database holds no sessions to replay"),
        ("slack/token_refused", {"code": None}, "SLACK_BOT_TOKEN: Slack's auth.test refused it (see Pacer's log)"),
        (
            "slack/token_refused",
            {"code": "invalid_auth"},
            "SLACK_BOT_TOKEN: Slack's auth.test refused it (invalid_auth)",
        ),
        (
            "simulate/plot_unwritable",
            {"path": "out.xyz", "problem": "format", "parent": ".", "suffix": ".xyz", "formats": ["pdf", "png"]},
            "--plot: cannot write out.xyz: .xyz is not an image format matplotlib writes; end the name with one of "
            ".pdf, .png",
        ),
    ],
)
def test_sentence_renders_as_written(name: str, context: dict[str, object], sentence: str) -> None:
    assert error_text(name, **context) == sentence


def test_a_missing_value_fails_loudly() -> None:
    with pytest.raises(UndefinedError):
        error_text("sessions/not_found")


def test_a_misspelt_value_fails_loudly() -> None:
    with pytest.raises(TypeError):
        error_text("sessions/not_found", session=7)
