"""Triggers as code: triggers.toml upserted by name at start; a bad file stops start-up with the
file, the line, the trigger, the key and the rule, and writes nothing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from bot.runtime.process import Pacer
from bot.triggers import file as triggers_file
from scheduler.errors import ConfigError
from scheduler.steering.firing import TriggerEvent, fire
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from tests.support.api_client import settings_for
from tests.support.harness import build
from tests.support.paths import ROOT

EXAMPLE = ROOT / "deploy" / "triggers.example.toml"


def triggers(ctx) -> dict[str, Trigger]:
    with session_scope(ctx.engine) as db:
        return {t.name: t for t in db.exec(select(Trigger))}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "triggers.toml"
    path.write_text(text)
    return path


def test_the_shipped_example_has_one_trigger_of_each_kind_and_loads(engine, clock) -> None:
    ctx, *_ = build(engine, clock)
    loaded = triggers_file.load(ctx, EXAMPLE)
    assert len(loaded.created) == 5 and loaded.updated == []
    found = triggers(ctx)
    assert sorted(t.kind for t in found.values()) == ["ao_event", "github_issue", "github_label", "schedule", "slack"]
    assert found["weekday-flaky-sweep"].config == {"cron": "0 6 * * 1-5", "timezone": "Europe/Vilnius"}
    assert found["issue-intake"].scheduling_class == "spot" and found["issue-intake"].precedence == 10
    assert found["triage-failures"].config == {"filter": {"trigger": "issue-intake"}, "states": ["failed", "blocked"]}
    again = triggers_file.load(ctx, EXAMPLE)
    assert again.created == [] and again.updated == [] and len(again.unchanged) == 5


def test_a_class_change_in_the_file_moves_that_triggers_waiting_sessions(engine, clock, tmp_path) -> None:
    ctx, deferrer, _workers, quota = build(engine, clock)
    quota.spend_out()
    body = '''
[[trigger]]
name = "sweeps"
kind = "schedule"
scheduling_class = "{cls}"
prompt_template = "sweep at {{{{ fired_at }}}}"
[trigger.config]
cron = "*/30 * * * *"
'''
    triggers_file.load(ctx, write(tmp_path, body.format(cls="spot")))
    tid = triggers(ctx)["sweeps"].id
    sids = [fire(ctx, tid, TriggerEvent("schedule", {"fired_at": f"t{i}"})).session_id for i in range(2)]
    loaded = triggers_file.load(ctx, write(tmp_path, body.format(cls="priority")))
    assert loaded.updated == ["sweeps"] and loaded.reclassified == {"sweeps": 2}
    deferrer.advance(timedelta(0))
    with session_scope(ctx.engine) as db:
        assert [db.get(Session, sid).status for sid in sids] == ["running", "running"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            '[[trigger]]\nname = "a"\nkind = "schedule"\nprompt_template = "x"\ncolour = "red"\n[trigger.config]\ncron = "* * * * *"\n',
            ["triggers.toml:5:", "trigger #1 'a'", "key 'colour' is not a trigger field", "allowed: name, kind"],
        ),
        (
            (
                '[[trigger]]\nname = "ok"\nkind = "schedule"\nprompt_template = "x"\n[trigger.config]\ncron = "* * * * *"\n\n'
                '[[trigger]]\nname = "nightly"\nkind = "schedule"\nprompt_template = "x"\n[trigger.config]\ncron = "0 24 * * *"\n'
            ),
            ["triggers.toml:13:", "trigger #2 'nightly'", "config.cron", "the hour field '24'", "0-23"],
        ),
        (
            '[[trigger]]\nname = "w"\nkind = "ao_event"\nprompt_template = "{{ session.id }}"\n[trigger.config]\nsession_id = 4\nstates = ["finished"]\n',
            ["triggers.toml:7:", "trigger #1 'w'", "config.states", "'finished' is not a state"],
        ),
        (
            '[[trigger]]\nname = "t"\nkind = "slack"\nprompt_template = "{% if %}"\n[trigger.config]\ndms = true\n',
            ["triggers.toml:4:", "trigger #1 't'", "prompt_template", "line 1"],
        ),
        (
            '[[trigger]]\nname = "p"\nkind = "github_label"\nprecedence = "top_of_spot"\nprompt_template = "{{ title }}"\n',
            ["triggers.toml:4:", "precedence", "whole number only"],
        ),
        (
            '[[trigger]]\nname = "k"\nkind = "email"\nprompt_template = "x"\n',
            ["triggers.toml:3:", "kind", "'email' is not a trigger kind"],
        ),
        (
            (
                '[[trigger]]\nname = "d"\nkind = "slack"\nprompt_template = "x"\n[trigger.config]\ndms = true\n'
                '[[trigger]]\nname = "d"\nkind = "slack"\nprompt_template = "x"\n[trigger.config]\ndms = true\n'
            ),
            ["triggers.toml:7:", "trigger #2 'd'", "already used by trigger #1"],
        ),
        (
            '[[trigger]]\nname = "g"\nkind = "github_issue"\nprompt_template = "x"\n[trigger.config]\nrepositories = ["acme/api", "_x/y"]\n',
            ["triggers.toml:6:", "trigger #1 'g'", "config.repositories: '_x/y' is not a repository", "single hyphens"],
        ),
        (
            '[[trigger]]\nname = "s"\nkind = "schedule"\nprompt_template = "x"\n[trigger.config]\ncron = "0 9 * * *"\nrepository = "a/x.git"\n',
            [
                "triggers.toml:7:",
                "trigger #1 's'",
                "config.repository: 'a/x.git' is not a repository",
                "nor ending in '.git'",
            ],
        ),
        ('name = "loose"\n', ["top-level key 'name' is not allowed"]),
        ('[[trigger]\nname = "x"\n', ["not valid TOML", "line 1"]),
    ],
)
def test_a_bad_file_stops_start_up_naming_file_line_trigger_key_and_rule(engine, clock, tmp_path, text, says) -> None:
    ctx, *_ = build(engine, clock)
    with pytest.raises(ConfigError) as raised:
        triggers_file.load(ctx, write(tmp_path, text))
    message = str(raised.value)
    for part in says:
        assert part in message, (part, message)
    assert triggers(ctx) == {}  # nothing written, not even the good entries before the bad one


def test_a_missing_file_and_a_kind_change_are_config_errors(engine, clock, tmp_path) -> None:
    ctx, *_ = build(engine, clock)
    with pytest.raises(ConfigError, match="file does not exist"):
        triggers_file.load(ctx, tmp_path / "nope.toml")
    triggers_file.load(
        ctx,
        write(
            tmp_path,
            '[[trigger]]\nname = "x"\nkind = "slack"\nprompt_template = "{{ text }}"\n[trigger.config]\ndms = true\n',
        ),
    )
    with pytest.raises(ConfigError, match="exists as slack; a trigger's kind cannot change"):
        triggers_file.load(
            ctx, write(tmp_path, '[[trigger]]\nname = "x"\nkind = "github_label"\nprompt_template = "{{ title }}"\n')
        )


def test_install_loads_the_configured_file(engine, clock, tmp_path) -> None:
    ctx, deferrer, *_ = build(engine, clock)
    path = write(
        tmp_path,
        '[[trigger]]\nname = "from-file"\nkind = "github_label"\nprompt_template = "{{ title }}"\n[trigger.config]\nlabel = "pacer"\n',
    )
    settings = settings_for(engine, PACER_TRIGGERS_FILE=str(path))
    pacer = Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)
    loaded = triggers_file.install(pacer)
    assert loaded is not None and loaded.created == ["from-file"]
    assert triggers(ctx)["from-file"].config == {"label": "pacer"}
    assert (
        triggers_file.install(
            Pacer(settings=settings_for(engine), engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)
        )
        is None
    )


def test_check_validates_the_configured_file_without_writing(engine, clock, tmp_path) -> None:
    ctx, *_ = build(engine, clock)
    assert triggers_file.check(settings_for(engine)) == []
    good = write(tmp_path, '[[trigger]]\nname = "g"\nkind = "github_label"\nprompt_template = "{{ title }}"\n')
    assert [s.name for s in triggers_file.check(settings_for(engine, PACER_TRIGGERS_FILE=str(good)))] == ["g"]
    bad = write(
        tmp_path, '[[trigger]]\nname = "g"\nkind = "github_label"\nprompt_template = "{{ title }}"\nlabels = ["x"]\n'
    )
    with pytest.raises(ConfigError, match="triggers.toml:5: trigger #1 'g': key 'labels' is not a trigger field"):
        triggers_file.check(settings_for(engine, PACER_TRIGGERS_FILE=str(bad)))
    with pytest.raises(ConfigError, match="file does not exist"):
        triggers_file.check(settings_for(engine, PACER_TRIGGERS_FILE=str(tmp_path / "gone.toml")))
    assert triggers(ctx) == {}
