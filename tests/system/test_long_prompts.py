"""A long prompt runs: a 65,536-character issue body of non-ASCII text (196,608 bytes, past the
131,071 bytes Linux takes in one command-line argument) reaches the agent whole, through a signed
webhook delivery into the real app and the command runner in the custody that ships — on stdin
(the default command), as the file {prompt_file} names, and from a template that puts {prompt} on
the command line, which gives it on stdin instead."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession

from bot.config.settings import load
from bot.runtime.adapters import build_pool, build_runner, runtimes_from_settings
from bot.runtime.notify import CompositeNotifier, LogNotifier
from bot.serve.app import create_app
from integrations.runners.invocation import ARGUMENT_BYTES, build_argv, split_template
from scheduler.clock import SystemClock
from scheduler.errors import InvalidInput
from scheduler.ports import TurnRequest
from scheduler.store.models import Trigger
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.support.custody_support import agent_python, custody_settings
from tests.support.github_support import SECRET, headers, issue_payload, serving
from tests.support.harness import T0, context

BODY = "€" * 65_536


@pytest.mark.parametrize("arguments", ["", "--file {prompt_file}", "{prompt}"])
def test_a_65536_character_non_ascii_issue_body_reaches_the_agent_whole(
    engine: Engine, room: Path, arguments: str
) -> None:
    settings = load({
        "GITHUB_WEBHOOK_SECRET": SECRET, "PACER_RUNNER": "command",
        "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / 'prompt_agent.py'} {arguments}",
        "PACER_WORKDIR": str(room / "work"), "PACER_WORKSPACES": str(room / "ws"), **custody_settings(room, "shipped"),
    }, toml_path=None)
    ctx = context(
        engine,
        SystemClock(),
        VirtualDeferrer(VirtualClock(T0)),
        build_pool(settings, build_runner(settings, dict(os.environ))),
        wired=True,
        notifier=CompositeNotifier(LogNotifier()),
        runtimes=runtimes_from_settings(settings),
    )
    with DBSession(engine) as db:
        db.add(
            Trigger(
                name="issues",
                kind="github_issue",
                prompt_template="{{ body }}",
                scheduling_class="priority",
                created_at=T0,
            )
        )
        db.commit()
    from bot.runtime.process import Pacer

    app = create_app(
        Pacer(settings=settings, engine=engine, clock=ctx.clock, deferrer=ctx.ports.deferrer, ctx=ctx),
        start_scheduler=False,
    )
    body = json.dumps(issue_payload("opened", repository="acme/api", number=3, body=BODY)).encode()
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        answer = client.post("/github/webhook", content=body, headers=headers("issues", body))
        assert answer.status_code == 202, answer.text
        seen = room / "work" / "session-1" / "prompt.json"
        deadline = time.monotonic() + 30
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    got = json.loads(seen.read_text())
    assert got == {"how": "file" if "file" in arguments else "stdin", "chars": 65_536,
                   "sha256": hashlib.sha256(BODY.encode()).hexdigest()}
    ctx.ports.workers.shutdown(wait=True)  # type: ignore[attr-defined]


def _turn(prompt: str) -> TurnRequest:
    return TurnRequest(turn_id=1, session_id=1, prompt=prompt)


def test_a_prompt_too_long_for_one_argument_leaves_it_for_stdin_or_is_refused_saying_why(tmp_path: Path) -> None:
    long = "x" * ARGUMENT_BYTES
    alone = build_argv(split_template("agent -p {prompt} --json", "T"), [], _turn(long), tmp_path)
    assert alone.argv == ["agent", "-p", "--json"] and alone.stdin == long
    fits = build_argv(split_template("agent -p {prompt}", "T"), [], _turn("x" * (ARGUMENT_BYTES - 1)), tmp_path)
    assert fits.argv[-1] == "x" * (ARGUMENT_BYTES - 1) and fits.stdin is None
    with pytest.raises(
        InvalidInput, match=r"the prompt is 131,071 bytes, past the 131,070 one command-line argument can hold"
    ) as info:
        build_argv(split_template("agent --prompt={prompt}", "T"), [], _turn(long), tmp_path)
    assert info.value.field == "prompt"
    as_file = build_argv(split_template("agent --file {prompt_file}", "T"), [], _turn(long), tmp_path)
    assert as_file.argv == ["agent", "--file", "/dev/fd/3"] and as_file.prompt_file and as_file.stdin is None
