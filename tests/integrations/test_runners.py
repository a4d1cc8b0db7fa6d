"""Runners: the echo agent, the command runner against a fake Claude Code CLI, the worker pool,
and the outcome classification table the queue holds act on."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.config.settings import load
from bot.runtime.adapters import build_pool, build_runner, runtimes_from_settings
from integrations.runners.command import CommandRunner
from integrations.runners.custody import supervisor_mark
from integrations.runners.echo import EchoRunner
from integrations.runners.invocation import build_argv, split_template
from integrations.runners.outcomes import (
    AgentReport,
    announced_model,
    announced_session,
    classify,
    parse_report,
    parse_reset,
)
from integrations.runners.pool import ThreadWorkerPool
from integrations.runners.streams import HEAD_BYTES, Announcement
from scheduler.errors import ConfigError, InvalidInput
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.testing import VirtualClock
from tests.support.custody_support import agent_user
from tests.support.paths import FIXTURES

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FAKE = FIXTURES / "fake_claude.py"
FAKE_TEMPLATE = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} -p {{prompt}} --output-format json"


def turn(prompt: str = "hello", *, session: int = 3, turn_id: int = 1, **kw: object) -> TurnRequest:
    return TurnRequest(session_id=session, turn_id=turn_id, prompt=prompt, **kw)  # type: ignore[arg-type]


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def in_thread(fn: Callable[[], TurnResult]) -> tuple[threading.Thread, list[TurnResult]]:
    out: list[TurnResult] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def is_alive(pid: int) -> bool:
    """A zombie counts as dead: PID 1 in a container may never reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def command_runner(tmp_path: Path, **kw: object) -> CommandRunner:
    options: dict[str, object] = {"env": {"PATH": "/usr/bin:/bin"}, "clock": VirtualClock(T0)}
    options.update(kw)
    template = str(options.pop("template", FAKE_TEMPLATE))
    timeout = float(options.pop("timeout_s", 30))  # type: ignore[arg-type]
    return CommandRunner(template, "--resume {agent_session_id}", "claude_code", timeout, tmp_path / "work", **options)  # type: ignore[arg-type]


def call(tmp_path: Path, session: int = 3) -> dict[str, object]:
    """What the fake CLI recorded about the call it received."""
    recorded: dict[str, object] = json.loads((tmp_path / "work" / f"session-{session}" / "fake_call.json").read_text())
    return recorded


# --- echo -------------------------------------------------------------------------------------


def test_echo_works_then_succeeds_with_its_cost_and_an_echo() -> None:
    runner = EchoRunner(0.05, 0.2)
    result = runner.run(turn("fix the flaky test", session=7, attachments=[{"name": "a"}, {"name": "b"}]))
    assert result.outcome is Outcome.SUCCESS
    assert result.cost_usd == 0.2
    assert result.output == "Echo: fix the flaky test (2 attachments)"
    assert result.agent_session_id == "echo-7"
    assert 40 <= result.duration_ms < 1000


def test_echo_output_keeps_the_first_200_characters() -> None:
    prompt = "a" * 200 + "TAIL"
    result = EchoRunner(0, 0.0).run(turn(prompt))
    assert result.output == "Echo: " + "a" * 200 + "… (0 attachments)"


def test_halting_echo_wakes_it_at_once_with_a_prorated_cost() -> None:
    runner = EchoRunner(5.0, 1.0)
    thread, out = in_thread(lambda: runner.run(turn(turn_id=11)))
    wait_for(lambda: runner.halt(11))
    started = time.monotonic()
    thread.join(2)
    assert time.monotonic() - started < 0.5
    (result,) = out
    assert result.outcome is Outcome.HALTED
    assert 0 < result.cost_usd < 0.1  # it ran a few ms of a 5 s, $1 turn
    assert result.agent_session_id == "echo-3"
    assert not runner.halt(11), "a finished turn is not running"
    assert not runner.halt(999)


@pytest.mark.parametrize(
    ("marker", "outcome"),
    [
        ("[echo:fail]", Outcome.FAILED),
        ("[echo:retry]", Outcome.FAILED_RETRYABLE),
        ("[echo:rate-limit]", Outcome.RATE_LIMITED),
        ("[echo:auth]", Outcome.AUTH_REJECTED),
        ("[echo:credits]", Outcome.CREDITS_EXHAUSTED),
        ("[echo:model-access]", Outcome.MODEL_ACCESS),
    ],
)
def test_echo_markers_choose_every_outcome(marker: str, outcome: Outcome) -> None:
    result = EchoRunner(5.0, 1.0).run(turn(f"please {marker} now"))
    assert result.outcome is outcome
    assert result.cost_usd == 0.0 and result.duration_ms < 100
    assert result.rate_limit_reset_at is None
    assert marker in (result.error or "")


def test_echo_rate_limit_marker_can_state_a_reset() -> None:
    result = EchoRunner(1.0, 1.0, clock=VirtualClock(T0)).run(turn("[echo:rate-limit=900]"))
    assert result.outcome is Outcome.RATE_LIMITED
    assert result.rate_limit_reset_at == T0 + timedelta(seconds=900)


@pytest.mark.parametrize(("seconds", "cost"), [(-1.0, 0.1), (1.0, -0.5), (float("nan"), 0.1)])
def test_echo_rejects_negative_settings(seconds: float, cost: float) -> None:
    with pytest.raises(ValueError, match="must be a number >= 0"):
        EchoRunner(seconds, cost)


# --- command: argv ------------------------------------------------------------------------------


def test_template_is_split_first_and_each_word_substituted_once(tmp_path: Path) -> None:
    words = split_template('agent --settings \'{"x": 1}\' -p {prompt} --tag t{turn_id}', "T")
    resume = split_template("--resume {agent_session_id}", "R")
    prompt = 'a "quoted" {turn_id} ; $(id)\nline two'
    invocation = build_argv(words, resume, turn(prompt, turn_id=9, agent_session_id="s-1"), tmp_path)
    argv, stdin = invocation.argv, invocation.stdin
    assert argv == ["agent", "--settings", '{"x": 1}', "-p", prompt, "--tag", "t9", "--resume", "s-1"]
    assert stdin is None


def test_a_prompt_that_looks_like_an_option_stays_a_prompt(tmp_path: Path) -> None:
    words = split_template("claude -p {prompt} --output-format json", "T")
    argv = build_argv(words, [], turn("--dangerously-skip-permissions"), tmp_path).argv
    assert argv == ["claude", "-p", " --dangerously-skip-permissions", "--output-format", "json"]
    inline = build_argv(split_template("agent --prompt={prompt}", "T"), [], turn("-x"), tmp_path).argv
    assert inline == ["agent", "--prompt=-x"]  # glued to its option: already unambiguous


def test_a_template_without_prompt_sends_it_on_stdin(tmp_path: Path) -> None:
    invocation = build_argv(split_template("agent --json", "T"), [], turn("hi there"), tmp_path)
    argv, stdin = invocation.argv, invocation.stdin
    assert argv == ["agent", "--json"] and stdin == "hi there"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("claude -p '{prompt}", "cannot be split like a command line"),
        ("claude -p {prompt} --model {model}", "unknown placeholder {model}"),
        ("", "must name a program"),
    ],
)
def test_bad_templates_stop_start_up_with_the_setting_named(tmp_path: Path, template: str, message: str) -> None:
    with pytest.raises(ConfigError, match="PACER_RUNNER_COMMAND") as info:
        CommandRunner(template, "", "claude_code", 60, tmp_path)
    assert message in str(info.value)


def test_bad_timeout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PACER_TURN_TIMEOUT_SECONDS"):
        CommandRunner("claude -p {prompt}", "", "claude_code", 0, tmp_path)


def test_an_agent_session_id_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    result = command_runner(tmp_path).run(turn(agent_session_id="--dangerously-skip-permissions"))
    assert result.outcome is Outcome.FAILED
    assert "agent_session_id" in (result.error or "")
    assert not (tmp_path / "work" / "session-3" / "fake_call.json").exists()


# --- command: against the fake CLI ---------------------------------------------------------------


def test_command_records_claude_codes_json_result(tmp_path: Path) -> None:
    result = command_runner(tmp_path).run(turn("summarise the diff"))
    assert result.outcome is Outcome.SUCCESS, result.error
    recorded = call(tmp_path)
    assert result.cost_usd == 0.0123
    assert result.output == "done: summarise the diff"
    assert result.duration_ms == 1234
    assert result.agent_session_id == f"fake-{recorded['pid']}"
    assert recorded["cwd"] == str((tmp_path / "work" / "session-3").resolve())
    assert "--resume" not in recorded["argv"]  # type: ignore[operator]


def test_a_later_turn_resumes_the_agent_session(tmp_path: Path) -> None:
    result = command_runner(tmp_path).run(turn("next step", agent_session_id="abc-123"))
    assert call(tmp_path)["argv"][-2:] == ["--resume", "abc-123"]  # type: ignore[index]
    assert result.agent_session_id == "abc-123"


def test_a_hostile_prompt_is_one_literal_argument_and_runs_nothing(tmp_path: Path) -> None:
    prompt = (
        f'"; touch {tmp_path}/pwned; echo "'
        f" $(touch {tmp_path}/pwned2) `touch {tmp_path}/pwned3` 'single' {{turn_id}} & | > {tmp_path}/pwned4\n$(id)"
    )
    result = command_runner(tmp_path).run(turn(prompt))
    assert result.outcome is Outcome.SUCCESS
    recorded = call(tmp_path)
    assert recorded["argv"] == ["-p", prompt, "--output-format", "json"]
    assert recorded["prompt"] == prompt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_the_prompt_goes_on_stdin_when_the_template_has_no_placeholder(tmp_path: Path) -> None:
    template = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} --output-format json"
    result = command_runner(tmp_path, template=template).run(turn("via stdin; $(id)"))
    assert result.outcome is Outcome.SUCCESS
    assert call(tmp_path)["prompt"] == "via stdin; $(id)"


def test_the_agent_gets_no_pacer_secrets(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "SLACK_BOT_TOKEN": "xoxb-secret", "DATABASE_URL": "postgres://u:p@h/db"}
    command_runner(tmp_path, env=env).run(turn(session=5, turn_id=8))
    seen = call(tmp_path, 5)["env"]
    assert seen == {"PACER_SESSION_ID": "5", "PACER_TURN_ID": "8", "PACER_SUPERVISOR": supervisor_mark(os.getpid())}


def test_halt_kills_the_whole_process_group(tmp_path: Path) -> None:
    runner = command_runner(tmp_path)
    thread, out = in_thread(lambda: runner.run(turn("[fake:child][fake:slow=30]", turn_id=21)))
    child_file = tmp_path / "work" / "session-3" / "child.pid"
    wait_for(lambda: child_file.exists() and child_file.read_text() != "")
    child, leader = int(child_file.read_text()), int(call(tmp_path)["pid"])  # type: ignore[call-overload]
    assert runner.halt(21)
    thread.join(5)
    (result,) = out
    assert result.outcome is Outcome.HALTED
    assert "halted" in (result.error or "")
    wait_for(lambda: not is_alive(child), timeout=2)
    assert not is_alive(leader)
    assert not runner.halt(21)


def test_halt_escalates_to_sigkill_when_the_agent_ignores_sigterm(tmp_path: Path) -> None:
    runner = command_runner(tmp_path, kill_grace_s=0.2)
    thread, out = in_thread(lambda: runner.run(turn("[fake:ignore-term][fake:slow=30]", turn_id=22)))
    wait_for(lambda: (tmp_path / "work" / "session-3" / "fake_call.json").exists())
    started = time.monotonic()
    assert runner.halt(22)
    thread.join(5)
    assert out[0].outcome is Outcome.HALTED
    assert 0.2 <= time.monotonic() - started < 1.5  # SIGTERM ignored; SIGKILL after the grace


def test_timeout_kills_the_group_and_is_retryable(tmp_path: Path) -> None:
    started = time.monotonic()
    result = command_runner(tmp_path, timeout_s=0.5, kill_grace_s=0.3).run(turn("[fake:child][fake:slow=30]"))
    assert time.monotonic() - started < 3
    assert result.outcome is Outcome.FAILED_RETRYABLE
    assert "0.5-second timeout" in (result.error or "")
    child = int((tmp_path / "work" / "session-3" / "child.pid").read_text())
    wait_for(lambda: not is_alive(child), timeout=2)


RESET_EPOCH = int((T0 + timedelta(hours=2)).timestamp())


@pytest.mark.parametrize(
    ("markers", "outcome", "reset_at"),
    [
        ("[fake:error=API Error: 429 rate_limit_error]", Outcome.RATE_LIMITED, None),
        (
            f"[fake:soft-error=Claude AI usage limit reached|{RESET_EPOCH}]",
            Outcome.RATE_LIMITED,
            T0 + timedelta(hours=2),
        ),
        ("[fake:stderr=Invalid API key · Please run /login]", Outcome.AUTH_REJECTED, None),
        ("[fake:error=Credit balance is too low]", Outcome.CREDITS_EXHAUSTED, None),
        ("[fake:error=API Error: 404 not_found_error model not found: claude-9]", Outcome.FAILED, None),
        ("[fake:error=API Error: 529 overloaded_error]", Outcome.FAILED_RETRYABLE, None),
        ("[fake:plain][fake:exit=3]", Outcome.FAILED_RETRYABLE, None),
    ],
)
def test_agent_failures_are_classified_end_to_end(
    tmp_path: Path, markers: str, outcome: Outcome, reset_at: datetime | None
) -> None:
    result = command_runner(tmp_path).run(turn(markers))
    assert result.outcome is outcome, result.error
    assert result.rate_limit_reset_at == reset_at
    assert result.error


def test_plain_output_succeeds_and_is_kept_as_the_output(tmp_path: Path) -> None:
    result = command_runner(tmp_path).run(turn("[fake:plain] hi"))
    assert result.outcome is Outcome.SUCCESS
    assert result.output.strip() == "plain answer to: [fake:plain] hi"
    assert result.cost_usd == 0.0 and result.agent_session_id is None


def test_a_json_lines_stream_is_read_from_its_last_result(tmp_path: Path) -> None:
    result = command_runner(tmp_path).run(turn("[fake:stream] go", agent_session_id="s-9"))
    assert result.outcome is Outcome.SUCCESS
    assert (result.cost_usd, result.agent_session_id, result.output) == (0.0123, "s-9", "done: [fake:stream] go")


def test_captured_output_is_bounded_and_the_result_still_read(tmp_path: Path) -> None:
    runner = command_runner(tmp_path, max_output_bytes=10_000)
    result = runner.run(turn("[fake:big=300000]"))
    assert result.outcome is Outcome.SUCCESS and result.cost_usd == 0.0123
    assert result.extra["output_truncated"] is True
    plain = runner.run(turn("[fake:big=300000][fake:plain]", turn_id=2))
    assert len(plain.output) <= 10_000 and plain.extra["output_truncated"] is True


def test_the_agent_session_is_heard_from_the_init_line_before_the_turn_is_cut_off(tmp_path: Path) -> None:
    heard: list[str] = []
    runner = command_runner(tmp_path)
    thread, out = in_thread(
        lambda: runner.run(turn("[fake:stream][fake:slow=30]", turn_id=31, on_agent_session=heard.append))
    )
    wait_for(lambda: heard != [])  # the agent has only printed its init line, and sleeps
    assert heard == [f"fake-{call(tmp_path)['pid']}"]
    assert runner.halt(31)
    thread.join(5)
    (result,) = out
    assert (result.outcome, result.agent_session_id) == (Outcome.HALTED, heard[0])  # a halted turn resumes it too
    assert heard == [heard[0]]  # told once


def test_the_final_json_result_still_names_the_session_and_a_known_one_is_not_told_again(tmp_path: Path) -> None:
    heard: list[str] = []
    result = command_runner(tmp_path).run(turn("one object at the end", on_agent_session=heard.append))
    assert heard == [result.agent_session_id] == [f"fake-{call(tmp_path)['pid']}"]
    resumed = command_runner(tmp_path).run(
        turn("[fake:stream] again", turn_id=2, agent_session_id="s-9", on_agent_session=heard.append)
    )
    assert resumed.agent_session_id == "s-9" and heard == [result.agent_session_id]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"type":"system","subtype":"init","session_id":"9f1c-2","tools":["Bash"]}', "9f1c-2"),
        ('{"type":"result","is_error":false,"session_id":"r-1","total_cost_usd":0.1}', "r-1"),
        (
            '{"type":"system","subtype":"init","session_id":"--dangerously-skip-permissions"}',
            None,
        ),  # an option, not an id
        ('{"type":"system","subtype":"init","session_id":42}', None),
        ('{"type":"assistant","session_id":"a-1"}', None),  # neither the init line nor the result
        ('{"session_id":"tool-output"}', None),  # another tool's JSON is its output
        ("session_id: plain text", None),
        ('{"type":"system","subtype":"init","session_id":"cut', None),
    ],
)
def test_announced_session(line: str, expected: str | None) -> None:
    assert announced_session(line) == expected


def test_a_turn_says_the_model_it_ran_from_the_init_line_else_the_command(tmp_path: Path) -> None:
    # the burn table's rows are per runtime and model (P22 item 9)
    assert command_runner(tmp_path).run(turn("[fake:stream] hi")).model == "claude-opus-4-1"
    chosen = f"{FAKE_TEMPLATE} --model claude-sonnet-4-5"
    assert command_runner(tmp_path, template=chosen).run(turn("hi", turn_id=2)).model == "claude-sonnet-4-5"
    assert command_runner(tmp_path).run(turn("hi", turn_id=3)).model is None  # neither says: unknown


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"type":"system","subtype":"init","session_id":"s","model":"claude-opus-4-1"}', "claude-opus-4-1"),
        ('{"type":"system","subtype":"init","session_id":"s","model":"--rm -rf"}', None),
        ('{"type":"system","subtype":"init","session_id":"s","model":7}', None),
        ('{"type":"assistant","session_id":"s","model":"claude-opus-4-1"}', None),
    ],
)
def test_announced_model(line: str, expected: str | None) -> None:
    assert announced_model(line) == expected


def test_the_head_is_read_across_chunks_only_so_far_and_a_failing_listener_stops_nothing() -> None:
    def broken(session_id: str) -> None:
        raise ConnectionError("database unreachable")

    head = Announcement(None, broken)
    init = b'{"type":"system","subtype":"init","session_id":"split-1"}\n'
    for chunk in (b"warming up\n" + init[:20], init[20:], b'{"type":"result","session_id":"other"}\n'):
        head.feed(chunk)
    assert head.said == "split-1" and not head.listening
    late = Announcement(None, None)
    late.feed(b"x" * HEAD_BYTES + init)
    assert late.said is None and not late.listening


def test_a_missing_program_is_a_failure_that_names_it(tmp_path: Path) -> None:
    result = command_runner(tmp_path, template="/nonexistent/claude -p {prompt}").run(turn())
    assert result.outcome is Outcome.FAILED
    assert "/nonexistent/claude was not found" in (result.error or "")


# --- classify: the table ------------------------------------------------------------------------

REPORT_OK = AgentReport(is_error=False, result="done", session_id="s", cost_usd=0.1, duration_ms=5)


def report_error(text: str) -> AgentReport:
    return AgentReport(is_error=True, result=text, session_id="s", cost_usd=0.0)


@pytest.mark.parametrize(
    ("exit_code", "stdout", "stderr", "parsed", "outcome", "reset_at"),
    [
        (0, '{"result": "done"}', "", REPORT_OK, Outcome.SUCCESS, None),
        (0, "plain text answer", "", None, Outcome.SUCCESS, None),
        (0, "", "warning: something noisy", None, Outcome.SUCCESS, None),
        # rate limits, with and without a stated reset
        (1, "", "API Error: 429 Too Many Requests", None, Outcome.RATE_LIMITED, None),
        (
            1,
            "",
            "Error: rate_limit_error: This request would exceed your account's rate limit",
            None,
            Outcome.RATE_LIMITED,
            None,
        ),
        (
            1,
            "",
            "rate limited; resets at 2026-11-30T14:00:00Z",
            None,
            Outcome.RATE_LIMITED,
            datetime(2026, 11, 30, 14, 0, tzinfo=UTC),
        ),
        (
            1,
            "",
            "Rate limit reached. Please try again in 15 minutes.",
            None,
            Outcome.RATE_LIMITED,
            T0 + timedelta(minutes=15),
        ),
        (1, "", "usage limit: reset in 3600 seconds", None, Outcome.RATE_LIMITED, T0 + timedelta(hours=1)),
        (1, "", "HTTP 429; retry-after: 120", None, Outcome.RATE_LIMITED, T0 + timedelta(seconds=120)),
        (
            0,
            "",
            "",
            report_error("Claude AI usage limit reached|1796047200"),
            Outcome.RATE_LIMITED,
            datetime(2026, 11, 30, 14, 0, tzinfo=UTC),
        ),
        (
            0,
            "",
            "",
            report_error("You've hit your limit · resets 4pm (Europe/Paris)"),
            Outcome.RATE_LIMITED,
            datetime(2026, 11, 30, 15, 0, tzinfo=UTC),
        ),
        (1, "", "Rate limit; resets at 2026-11-30T11:00:00Z", None, Outcome.RATE_LIMITED, None),  # past: none
        (1, "", "Quota exceeded for quota metric 'Generate requests' per minute", None, Outcome.RATE_LIMITED, None),
        # auth
        (1, "", 'API Error: 401 {"type":"authentication_error"}', None, Outcome.AUTH_REJECTED, None),
        (1, "", "Invalid API key · Please run /login", None, Outcome.AUTH_REJECTED, None),
        (1, "", "OAuth token has expired. Please obtain a new token", None, Outcome.AUTH_REJECTED, None),
        (0, "", "", report_error("Authentication failed"), Outcome.AUTH_REJECTED, None),
        # credits
        (
            1,
            "",
            "API Error: 400 Your credit balance is too low to access the Anthropic API.",
            None,
            Outcome.CREDITS_EXHAUSTED,
            None,
        ),
        (
            1,
            "",
            "insufficient_quota: You exceeded your current quota, please check your plan and billing",
            None,
            Outcome.CREDITS_EXHAUSTED,
            None,
        ),
        (1, "", "Insufficient credits on this account", None, Outcome.CREDITS_EXHAUSTED, None),
        # seed 002 "Model access": the plan does not include the chosen model (a key that cannot
        # use a model stays a task failure, below)
        (
            1,
            "",
            "Claude Opus 4 is not available with the Claude Pro plan. Run /logout and /login",
            None,
            Outcome.MODEL_ACCESS,
            None,
        ),
        (
            1,
            "",
            "API Error: 403 Your plan does not include access to claude-opus-4-1.",
            None,
            Outcome.MODEL_ACCESS,
            None,
        ),
        (0, "", "", report_error("Your subscription doesn't include Opus."), Outcome.MODEL_ACCESS, None),
        # not retryable
        (1, "", "API Error: 400 invalid_request_error: prompt is too long", None, Outcome.FAILED, None),
        (1, "", "model not found: claude-9", None, Outcome.FAILED, None),
        (1, "", "Your organization does not have access to this model", None, Outcome.FAILED, None),
        # retryable
        (1, "", "API Error: 529 overloaded_error", None, Outcome.FAILED_RETRYABLE, None),
        (1, "", "API Error: 500 internal server error", None, Outcome.FAILED_RETRYABLE, None),
        (1, "", "Error: connect ECONNREFUSED 127.0.0.1:443", None, Outcome.UNREACHABLE, None),
        (1, "", "API Error: Connection error. (read ECONNRESET)", None, Outcome.UNREACHABLE, None),
        (1, "", "fetch failed: getaddrinfo EAI_AGAIN api.anthropic.com", None, Outcome.UNREACHABLE, None),
        (1, "", "error: connection reset by peer", None, Outcome.UNREACHABLE, None),
        (2, "processed 400 files then crashed", "", None, Outcome.FAILED_RETRYABLE, None),
        (-9, "", "", None, Outcome.FAILED_RETRYABLE, None),
        (0, "", "", report_error("error_max_turns"), Outcome.FAILED_RETRYABLE, None),
    ],
)
def test_classify_table(
    exit_code: int, stdout: str, stderr: str, parsed: AgentReport | None, outcome: Outcome, reset_at: datetime | None
) -> None:
    got, got_reset, error = classify(exit_code, stdout, stderr, parsed, T0)
    assert (got, got_reset) == (outcome, reset_at)
    assert (error is None) == (outcome is Outcome.SUCCESS)


def test_classify_errors_quote_the_provider_and_the_exit() -> None:
    _, _, error = classify(3, "", "line one\nboom: the real reason\n", None, T0)
    assert error == "The agent exited with status 3: line one boom: the real reason"
    _, _, killed = classify(-9, "", "", None, T0)
    assert killed == "The agent was killed by signal 9"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("resets at 2026-11-30 13:30", datetime(2026, 11, 30, 13, 30, tzinfo=UTC)),
        ("resets at 2026-11-30T15:00:00+01:00", datetime(2026, 11, 30, 14, 0, tzinfo=UTC)),
        ("resets 9am (America/Chicago)", datetime(2026, 11, 30, 15, 0, tzinfo=UTC)),
        ("resets 11am (UTC)", datetime(2026, 12, 1, 11, 0, tzinfo=UTC)),  # 11:00 passed: tomorrow
        ("resets 1:30am (Asia/Dhaka)", datetime(2026, 11, 30, 19, 30, tzinfo=UTC)),
        ("try again in 2 hours", T0 + timedelta(hours=2)),
        ("retry after 500ms", T0 + timedelta(seconds=0.5)),
        ("resets 4pm (Not/AZone)", None),
        ("try again in a few minutes", None),
        ("retry 3 times", None),
    ],
)
def test_parse_reset(text: str, expected: datetime | None) -> None:
    assert parse_reset(text, T0) == expected


def test_parse_report_tolerates_streams_and_malformed_fields() -> None:
    assert parse_report("not json") is None
    assert parse_report('{"type": "assistant"}\n') is None  # another tool's JSON stays output
    stream = '{"type":"system"}\n{"type":"result","total_cost_usd":0.5,"session_id":"s1","result":"ok"}\n'
    assert parse_report(stream) == AgentReport(result="ok", session_id="s1", cost_usd=0.5)
    odd = parse_report('{"total_cost_usd": "lots", "session_id": "-rf", "duration_ms": true, "is_error": "yes"}')
    assert odd == AgentReport()


# --- the worker pool ----------------------------------------------------------------------------


class ExplodingRunner:
    def run(self, request: TurnRequest) -> TurnResult:
        raise ZeroDivisionError("the runner divided by zero")

    def halt(self, turn_id: int) -> bool:
        return False


def test_a_runner_that_raises_still_reports_exactly_once() -> None:
    pool = ThreadWorkerPool(ExplodingRunner(), 2)
    results: list[TurnResult] = []
    pool.submit(turn(agent_session_id="a-1"), results.append)
    pool.shutdown(wait=True)
    (result,) = results
    assert result.outcome is Outcome.FAILED_RETRYABLE
    assert result.error == "The runner raised ZeroDivisionError: the runner divided by zero"
    assert result.agent_session_id == "a-1" and pool.active() == 0


def test_an_on_done_that_raises_is_not_called_again() -> None:
    pool = ThreadWorkerPool(EchoRunner(0, 0.01), 1)
    calls: list[TurnResult] = []

    def on_done(result: TurnResult) -> None:
        calls.append(result)
        raise RuntimeError("the recorder failed")

    pool.submit(turn(), on_done)
    pool.shutdown(wait=True)
    assert [r.outcome for r in calls] == [Outcome.SUCCESS]


def test_the_pool_runs_turns_off_the_callers_thread_and_reports_each() -> None:
    pool = ThreadWorkerPool(EchoRunner(0.05, 0.01), 2)
    threads: dict[int, str] = {}
    done = threading.Semaphore(0)

    def recorder(turn_id: int) -> Callable[[TurnResult], None]:
        def on_done(result: TurnResult) -> None:
            threads[turn_id] = threading.current_thread().name
            done.release()

        return on_done

    for turn_id in (1, 2, 3):
        pool.submit(turn(turn_id=turn_id, session=turn_id), recorder(turn_id))
    assert pool.active() == 3
    for _ in range(3):
        assert done.acquire(timeout=2)
    assert sorted(threads) == [1, 2, 3]
    assert all(name.startswith("pacer-turn") for name in threads.values())
    wait_for(lambda: pool.active() == 0)
    pool.shutdown()


def test_halt_stops_a_running_turn_and_a_queued_one_never_runs() -> None:
    pool = ThreadWorkerPool(EchoRunner(5.0, 1.0), 1)
    results: dict[int, TurnResult] = {}
    done = threading.Semaphore(0)

    def on_done_for(turn_id: int) -> Callable[[TurnResult], None]:
        def on_done(result: TurnResult) -> None:
            results[turn_id] = result
            done.release()

        return on_done

    pool.submit(turn(turn_id=1), on_done_for(1))
    pool.submit(turn(turn_id=2), on_done_for(2))
    assert pool.halt(2)
    assert done.acquire(timeout=1)
    assert results[2].outcome is Outcome.HALTED and results[2].extra == {"ran": False}
    assert pool.halt(1)
    assert done.acquire(timeout=1)
    assert results[1].outcome is Outcome.HALTED and results[1].cost_usd < 0.1
    assert not pool.halt(1) and not pool.halt(42)
    pool.shutdown()


def test_shutdown_with_halt_reports_every_turn() -> None:
    pool = ThreadWorkerPool(EchoRunner(5.0, 1.0), 1)
    results: list[TurnResult] = []
    pool.submit(turn(turn_id=1), results.append)
    pool.submit(turn(turn_id=2), results.append)
    started = time.monotonic()
    pool.shutdown(wait=True, halt=True)
    assert time.monotonic() - started < 1
    assert [r.outcome for r in results] == [Outcome.HALTED, Outcome.HALTED]
    assert pool.active() == 0
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(turn(turn_id=3), results.append)


def test_the_pool_refuses_bad_input() -> None:
    with pytest.raises(InvalidInput, match="workers=0"):
        ThreadWorkerPool(EchoRunner(0, 0), 0)
    pool = ThreadWorkerPool(EchoRunner(1.0, 0), 1)
    pool.submit(turn(turn_id=5), lambda r: None)
    with pytest.raises(InvalidInput, match="turn 5 is already in the worker pool"):
        pool.submit(turn(turn_id=5), lambda r: None)
    pool.shutdown(wait=True, halt=True)


# --- wiring from settings ------------------------------------------------------------------------


def test_build_runner_and_runtimes_follow_the_settings(tmp_path: Path) -> None:
    echo = load({"PACER_ECHO_SECONDS": "30", "PACER_ECHO_COST_USD": "0.25"}, toml_path=None)
    assert isinstance(build_runner(echo), EchoRunner)
    runtimes = runtimes_from_settings(echo)
    assert runtimes["echo"].spends_quota and runtimes["echo"].default_burn_per_min == pytest.approx(0.5)
    assert runtimes["claude_code"].spends_quota

    user = {"PACER_AGENT_USER": agent_user()} if os.geteuid() == 0 else {}  # as root, agents need their own user
    command = load(
        {"PACER_RUNNER": "command", "PACER_RUNTIME_NAME": "codex", "PACER_RUNTIME_SPENDS_QUOTA": "false",
         "PACER_WORKDIR": str(tmp_path), "PACER_AGENT_WORKERS": "3", **user},
        toml_path=None,
    )
    runner = build_runner(command, {"PATH": "/bin"})
    assert isinstance(runner, CommandRunner)
    assert runner.words == ["claude", "-p", "--output-format", "stream-json", "--verbose"]  # the prompt goes on stdin
    assert runner.resume_words == ["--resume", "{agent_session_id}"]
    assert runtimes_from_settings(command)["codex"].spends_quota is False
    pool = build_pool(command, runner)
    assert pool.workers == 3 and pool.runner is runner
    pool.shutdown()
