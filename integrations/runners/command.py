"""The command runner: a CLI agent (Claude Code first) run as a subprocess, one process a turn.

    runner = CommandRunner("claude -p {prompt} --output-format json",
                           "--resume {agent_session_id}", "claude_code", 3600, "./var/work",
                           withheld=frozenset({"SLACK_BOT_TOKEN", "DATABASE_URL"}))
    result = runner.run(request)      # blocking; on a worker thread
    runner.halt(request.turn_id)      # from any thread: SIGTERM the group, SIGKILL after a grace

Never a shell. The template is split with `shlex.split` once, at start-up, and the placeholders
are substituted inside each argument afterwards, in one pass, so a prompt is always exactly one
argv element whatever it holds (quotes, `;`, `$(...)`, newlines) and a prompt that contains
`{turn_id}` is not substituted again; a prompt beginning with "-" gets a leading space where it
begins an argument, so it cannot be read as an option. Placeholders: {prompt} {agent_session_id} {session_id}
{turn_id} {workdir}. A template without {prompt} gets the prompt on stdin instead. The resume
arguments are appended only on a turn that carries an agent session id.

Each turn runs in the session's working directory (`<workdir_root>/session-<id>`, created, or
the request's own `workdir`), in its own process group, so a halt or a timeout kills the agent
and everything it spawned; when the agent exits, anything it left behind in its group is killed
too, so no turn outlives its result. The child gets Pacer's environment minus the `withheld`
names the caller gives (`bot.adapters` withholds Pacer's secrets and the database URL): an agent
reads untrusted prompts and has no business with them.

Output is captured through reader threads that keep the last `max_output_bytes` of each stream
(the JSON result and the error are at the end), so a chatty agent never blocks on a full pipe
nor fills memory. The agent's session id is heard as soon as it says it (`streams`: Claude
Code's stream-json init line) and passed to `request.on_agent_session`, so a turn cut off
before its result still resumes that conversation; the result carries it as well.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from integrations.runners.outcomes import AGENT_SESSION_ID, AgentReport, classify, model_option, parse_report, refused_model
from integrations.runners.streams import Announcement, Tail
from scheduler.clock import SystemClock
from scheduler.errors import ConfigError, InvalidInput
from scheduler.ports import Clock, Outcome, TurnRequest, TurnResult
from templates import error_text, render

log = logging.getLogger("pacer.runner")

PLACEHOLDERS = ("prompt", "agent_session_id", "session_id", "turn_id", "workdir")
MAX_OUTPUT_BYTES = 1_048_576
KILL_GRACE_SECONDS = 3.0
POLL_SECONDS = 0.1  # how often a waiting turn looks at its halt flag and its deadline
READER_JOIN_SECONDS = 2.0  # a daemonised grandchild may hold the pipe open; don't wait forever

_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split_template(template: str, setting: str) -> list[str]:
    """`template` as argv words, checked; a bad one raises ConfigError naming `setting`."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ConfigError(error_text("runners/unsplittable", setting=setting, template=template, problem=exc)) from None
    unknown = sorted({m.group(1) for w in words for m in _ANY_NAME.finditer(w)} - set(PLACEHOLDERS))
    if unknown:
        allowed = ["{" + p + "}" for p in PLACEHOLDERS]
        raise ConfigError(error_text("runners/unknown_placeholder", setting=setting, template=template, name=unknown[0], allowed=allowed))
    return words


def build_argv(
    words: list[str], resume_words: list[str], request: TurnRequest, workdir: Path
) -> tuple[list[str], str | None]:
    """The argv for one turn and the text for its stdin (the prompt, when no word takes it).

    Pure. Raises InvalidInput when the request's agent session id is not a plain identifier,
    since it would be passed as an argument.
    """
    resume = request.agent_session_id
    if resume is not None and not AGENT_SESSION_ID.match(resume):
        raise InvalidInput(error_text("runners/agent_session_id", value=resume[:40]), field="agent_session_id")
    values = {
        "prompt": request.prompt,
        "agent_session_id": resume or "",
        "session_id": str(request.session_id),
        "turn_id": str(request.turn_id),
        "workdir": str(workdir),
    }
    chosen = words + (resume_words if resume else [])
    argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], word) for word in chosen]
    if request.prompt.startswith("-"):
        # Claude Code takes the prompt as a positional argument: a prompt reading
        # "--dangerously-skip-permissions" would be parsed as that option. A leading space
        # keeps it a prompt and changes nothing an agent reads.
        argv = [" " + arg if word.startswith("{prompt}") else arg for word, arg in zip(chosen, argv, strict=True)]
    takes_prompt = any("{prompt}" in word for word in chosen)
    return argv, None if takes_prompt else request.prompt


def child_environment(environ: Mapping[str, str], withheld: frozenset[str]) -> dict[str, str]:
    """The agent's environment: Pacer's own, minus the `withheld` names (Pacer's secrets)."""
    return {k: v for k, v in environ.items() if k not in withheld}


@dataclass
class _Turn:
    """One running turn's process, and whether Pacer asked it to stop."""

    halted: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    proc: subprocess.Popen[bytes] | None = None
    finished: bool = False


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # start_new_session=True made the agent its own group leader: its pid is the group id.
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8"))
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


class CommandRunner:
    """Runner port over a CLI agent. Thread-safe: one `run` per worker thread, `halt` from any."""

    def __init__(
        self,
        template: str,
        resume_args: str,
        runtime_name: str,
        timeout_s: float,
        workdir_root: str | Path,
        *,
        withheld: frozenset[str],
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
        kill_grace_s: float = KILL_GRACE_SECONDS,
    ) -> None:
        self.words = split_template(template, "PACER_RUNNER_COMMAND")
        if not self.words:
            raise ConfigError(error_text("runners/no_program"))
        self.resume_words = split_template(resume_args, "PACER_RUNNER_RESUME_ARGS")
        if timeout_s <= 0:
            raise ConfigError(error_text("runners/timeout", value=timeout_s))
        self.runtime_name = runtime_name
        self.timeout_s = float(timeout_s)
        self.workdir_root = Path(workdir_root)
        self.max_output_bytes = max_output_bytes
        self.kill_grace_s = kill_grace_s
        self._env = child_environment(os.environ if env is None else env, withheld)
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._turns: dict[int, _Turn] = {}

    def workdir_for(self, request: TurnRequest) -> Path:
        return Path(request.workdir) if request.workdir else self.workdir_root / f"session-{request.session_id}"

    def halt(self, turn_id: int) -> bool:
        """SIGTERM the turn's process group (SIGKILL follows after the grace); False if not running."""
        with self._lock:
            turn = self._turns.get(turn_id)
        if turn is None:
            return False
        with turn.lock:
            if turn.finished:
                return False
            turn.halted.set()
            proc = turn.proc
        if proc is not None:
            _signal_group(proc, signal.SIGTERM)
        return True

    def run(self, request: TurnRequest) -> TurnResult:
        workdir = self.workdir_for(request)
        try:
            argv, stdin_text = build_argv(self.words, self.resume_words, request, workdir)
        except InvalidInput as exc:
            return self._failed(request, Outcome.FAILED, str(exc))
        workdir.mkdir(parents=True, exist_ok=True)
        turn = _Turn()
        with self._lock:
            if request.turn_id in self._turns:
                raise RuntimeError(f"turn {request.turn_id} is already running on {self.runtime_name}")
            self._turns[request.turn_id] = turn
        try:
            return self._execute(request, argv, stdin_text, workdir, turn)
        finally:
            with self._lock:
                self._turns.pop(request.turn_id, None)

    def _execute(
        self, request: TurnRequest, argv: list[str], stdin_text: str | None, workdir: Path, turn: _Turn
    ) -> TurnResult:
        env = dict(self._env, PACER_SESSION_ID=str(request.session_id), PACER_TURN_ID=str(request.turn_id))
        started = time.monotonic()
        try:
            proc = subprocess.Popen(  # an argv list, never a shell
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError:
            return self._failed(request, Outcome.FAILED, render("text/runner_error.j2", kind="not_found", program=argv[0]))
        except OSError as exc:
            message = exc.strerror or type(exc).__name__
            return self._failed(
                request, Outcome.FAILED, render("text/runner_error.j2", kind="not_started", program=argv[0], message=message)
            )
        with turn.lock:
            turn.proc = proc
            halted_before_start = turn.halted.is_set()
        if halted_before_start:
            _signal_group(proc, signal.SIGTERM)
        try:
            head = Announcement(request.agent_session_id, request.on_agent_session)
            out, err = Tail(proc.stdout, self.max_output_bytes, head), Tail(proc.stderr, self.max_output_bytes)
            out.start()
            err.start()
            if stdin_text is not None:
                threading.Thread(target=_feed, args=(proc, stdin_text), daemon=True, name="pacer-runner-stdin").start()
            timed_out = self._wait(proc, turn, started + self.timeout_s)
        except BaseException:
            _signal_group(proc, signal.SIGKILL)  # never leave an agent running behind an error
            proc.wait()
            raise
        with turn.lock:
            turn.finished = True
        _signal_group(proc, signal.SIGKILL)  # whatever the agent left running in its group
        out.join(READER_JOIN_SECONDS)
        err.join(READER_JOIN_SECONDS)
        wall_ms = int((time.monotonic() - started) * 1000)
        if head.said is not None:
            request = replace(request, agent_session_id=head.said)  # a turn cut off after the init line resumes it
        return self._result(request, proc.returncode, out, err, wall_ms, timed_out, turn.halted.is_set())

    def _wait(self, proc: subprocess.Popen[bytes], turn: _Turn, deadline: float) -> bool:
        """Wait for the agent; on a halt or past the deadline, SIGTERM then SIGKILL its group.

        Returns whether the deadline passed.
        """
        timed_out = False
        term_sent_at: float | None = None
        while True:
            now = time.monotonic()
            if term_sent_at is None and turn.halted.is_set():
                term_sent_at = now  # halt() already sent the SIGTERM
            if term_sent_at is None and now >= deadline:
                timed_out, term_sent_at = True, now
                log.warning("turn ran past its %.0fs timeout; terminating pid %s", self.timeout_s, proc.pid)
                _signal_group(proc, signal.SIGTERM)
            if term_sent_at is not None and now - term_sent_at >= self.kill_grace_s:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
                return timed_out
            step = POLL_SECONDS if term_sent_at is not None else min(POLL_SECONDS, max(deadline - now, 0.0))
            try:
                proc.wait(timeout=max(step, 0.001))
                return timed_out
            except subprocess.TimeoutExpired:
                continue

    def _result(
        self,
        request: TurnRequest,
        exit_code: int,
        out: Tail,
        err: Tail,
        wall_ms: int,
        timed_out: bool,
        halted: bool,
    ) -> TurnResult:
        stdout, stderr = out.text(), err.text()
        report: AgentReport | None = parse_report(stdout)
        extra = {
            "exit_code": exit_code,
            "wall_ms": wall_ms,
            "program": self.words[0],
            "output_truncated": out.truncated or err.truncated,
            "subtype": report.subtype if report else None,
        }
        base = TurnResult(
            outcome=Outcome.SUCCESS,
            cost_usd=(report.cost_usd or 0.0) if report else 0.0,
            output=(report.result or "") if report else stdout,
            duration_ms=report.duration_ms if report and report.duration_ms is not None else wall_ms,
            agent_session_id=(report.session_id if report and report.session_id else request.agent_session_id),
            extra=extra,
        )
        if halted:
            return replace(base, outcome=Outcome.HALTED, error=render("text/runner_error.j2", kind="halted"))
        if timed_out:
            error = render("text/runner_error.j2", kind="timeout", seconds=f"{self.timeout_s:g}")
            return replace(base, outcome=Outcome.FAILED_RETRYABLE, error=error)
        outcome, reset_at, failure = classify(exit_code, stdout, stderr, report, self._clock.now())
        if outcome is Outcome.MODEL_ACCESS:
            # The queue hold names the model: as the refusal wrote it, else as the command chose it.
            extra["model"] = refused_model(failure or "") or model_option(self.words)
        if outcome is not Outcome.SUCCESS:
            log.info("turn %s of session %s: %s (%s)", request.turn_id, request.session_id, outcome.value, failure)
        return replace(base, outcome=outcome, error=failure, rate_limit_reset_at=reset_at, extra=extra)

    def _failed(self, request: TurnRequest, outcome: Outcome, error: str) -> TurnResult:
        log.warning("turn %s of session %s not started: %s", request.turn_id, request.session_id, error)
        return TurnResult(outcome=outcome, error=error, agent_session_id=request.agent_session_id)


__all__ = ["CommandRunner", "build_argv", "child_environment", "classify", "split_template"]
