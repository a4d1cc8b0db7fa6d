"""The command runner: a CLI agent (Claude Code first) run as a subprocess, one process a turn.

    runner = CommandRunner("claude -p --output-format stream-json --verbose", "--resume {agent_session_id}",
                           "claude_code", 3600, "./var/work", custody=Custody())
    result = runner.run(request)      # blocking; on a worker thread
    runner.halt(request.turn_id)      # from any thread: the agent is stopped, then killed after a grace

How the agent is invoked (never a shell; the placeholders; where the prompt goes) is
`invocation.py`.

Each turn runs in the session's working directory (`<workdir_root>/session-<id>`, or the request's
own `workdir`), under the custody `custody` describes (custody.py): the leash, which ends the
agent and everything it spawned when the turn ends, when it is halted or timed out, and when
the Pacer process supervising it dies; an environment of allowlisted names only; and, where
configured, its own user or a sandbox.

Output is captured through reader threads that keep the last `max_output_bytes` of each stream
(the JSON result and the error are at the end), so a chatty agent never blocks on a full pipe
nor fills memory. The agent's session id is heard as soon as it says it (`streams`: Claude
Code's stream-json init line) and passed to `request.on_agent_session`, so a turn cut off
before its result still resumes that conversation; the result carries it as well. Every line is
read as it flows for the provider's own quota readings (`provider_events`): each goes to
`provider_sink` at once, tagged with `account`, and the last of each window is in the result's
`extra["provider_readings"]`; what the agent is doing (the tool in use, its todo list) goes to
`request.on_progress` as it changes (`progress`). A turn that fails after the provider said `rejected` is a rate
limit until that window's reset, whatever its error text says. An agent run with streamed input
(`--input-format stream-json`) gets its prompt as the first line on stdin, and the messages
people send the session while it works (`request.inbox`) after it, until it answers (`listening`).

An agent that prints nothing at all, on either pipe, for `stall_s` (PACER_STALL_MINUTES) is
stalled: its leash is asked to stop it as on a timeout, and the turn is a retryable failure
whose error says it stalled (`extra["stalled"]`), so the failure policy retries it on its backoff.
`stall_s` None or 0 never calls an agent stalled (one that prints only its final result, as
`--output-format json` does, needs a stall longer than its longest turn, or none).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import integrations.runners.outcomes as outcomes
from integrations.runners.custody import Custody
from integrations.runners.invocation import BUDGET_REACHED, Invocation, budget_option, build_argv, split_template
from integrations.runners.leash import CANNOT_RUN, NOT_EXECUTABLE
from integrations.runners.listening import Answered, Listener, StdinFeed, user_line
from integrations.runners.outcomes import classify
from integrations.runners.provider_events import as_plain
from integrations.runners.streams import Announcement, ProgressWatch, ProviderWatch, Tail
from scheduler.clock import SystemClock
from scheduler.errors import ConfigError, InvalidInput
from scheduler.ports import Clock, Outcome, ProviderReading, ProviderSink, TurnRequest, TurnResult
from templates import error_text, render

log = logging.getLogger("pacer.runner")

MAX_OUTPUT_BYTES = 1_048_576
KILL_GRACE_SECONDS = 3.0
POLL_SECONDS = 0.1  # how often a waiting turn looks at its halt flag and its deadline
READER_JOIN_SECONDS = 2.0  # a daemonised grandchild may hold the pipe open; don't wait forever
LEASH_MARGIN_SECONDS = 1.0  # past the grace, a leash that has not ended its agent is killed with its group

def _prompt_descriptor(prompt: str) -> int:
    """An in-memory file holding `prompt`, read from its start: the agent inherits it."""
    fd = os.memfd_create("pacer-prompt", 0)
    os.write(fd, prompt.encode("utf-8", errors="replace"))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@dataclass
class _Turn:
    """One running turn's process, and whether Pacer asked it to stop."""

    halted: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    proc: subprocess.Popen[bytes] | None = None
    finished: bool = False


def _signal_leash(proc: subprocess.Popen[bytes]) -> None:
    """Ask the leash to stop its agent: it SIGTERMs every descendant, SIGKILLs them after its grace."""
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def _silence(seconds: float) -> str:
    """How long a stalled agent was silent, as PACER_STALL_MINUTES reads: "10 minutes", "2 seconds"."""
    amount, unit = (seconds / 60, "minute") if seconds >= 60 else (seconds, "second")
    return f"{amount:g} {unit}{'' if amount == 1 else 's'}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The leash leads a session of its own: its pid is the group id of all it has not moved away.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
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


def _listen(proc: subprocess.Popen[bytes], request: TurnRequest, answered: ProgressWatch) -> Listener:
    """Streamed input: the prompt as the first line, then people's messages until it answers."""
    feed = StdinFeed(proc.stdin)
    feed.say(user_line(request.prompt))
    feed.start()
    listener = Listener(request.inbox, feed, answered.event if isinstance(answered, Answered) else threading.Event())
    listener.start()
    return listener


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
        custody: Custody | None = None,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
        kill_grace_s: float = KILL_GRACE_SECONDS,
        provider_sink: ProviderSink | None = None,
        account: str = "default",
        stall_s: float | None = None,
    ) -> None:
        self.words = split_template(template, "PACER_RUNNER_COMMAND")
        if not self.words:
            raise ConfigError(error_text("runners/no_program"))
        self.resume_words = split_template(resume_args, "PACER_RUNNER_RESUME_ARGS")
        self.budget = budget_option(self.words)
        if timeout_s <= 0:
            raise ConfigError(error_text("runners/timeout", value=timeout_s))
        if stall_s is not None and not stall_s >= 0:
            raise ConfigError(error_text("runners/stall", value=stall_s))
        self.runtime_name = runtime_name
        self.timeout_s = float(timeout_s)
        self.stall_s = float(stall_s) if stall_s else None
        self.workdir_root = Path(workdir_root)
        self.max_output_bytes = max_output_bytes
        self.kill_grace_s = kill_grace_s
        self.custody = custody or Custody()
        self._environ = dict(os.environ if env is None else env)
        self._clock = clock or SystemClock()
        self.provider_sink = provider_sink
        self.account = account
        self._lock = threading.Lock()
        self._turns: dict[int, _Turn] = {}

    def workdir_for(self, request: TurnRequest) -> Path:
        return Path(request.workdir) if request.workdir else self.workdir_root / f"session-{request.session_id}"

    def halt(self, turn_id: int) -> bool:
        """Stop the turn's agent (SIGKILL follows after the grace); False if not running."""
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
            _signal_leash(proc)
        return True

    def run(self, request: TurnRequest) -> TurnResult:
        workdir = self.workdir_for(request)
        try:
            invocation = build_argv(self.words, self.resume_words, request, workdir, budget=self.budget)
        except InvalidInput as exc:
            return self._failed(request, Outcome.FAILED, str(exc))
        self.custody.prepare(workdir)
        turn = _Turn()
        with self._lock:
            if request.turn_id in self._turns:
                raise RuntimeError(f"turn {request.turn_id} is already running on {self.runtime_name}")
            self._turns[request.turn_id] = turn
        try:
            return self._execute(request, invocation, workdir, turn)
        finally:
            self.custody.release(workdir)
            with self._lock:
                self._turns.pop(request.turn_id, None)

    def _execute(self, request: TurnRequest, invocation: Invocation, workdir: Path, turn: _Turn) -> TurnResult:
        argv, stdin_text = invocation.argv, invocation.stdin
        env = self.custody.environment(
            self._environ, {"PACER_SESSION_ID": str(request.session_id), "PACER_TURN_ID": str(request.turn_id)}
        )
        prompt_fd = _prompt_descriptor(request.prompt) if invocation.prompt_file else None
        started = time.monotonic()
        try:
            proc = subprocess.Popen(  # an argv list, never a shell
                self.custody.command(argv, workdir, grace_s=self.kill_grace_s, prompt_fd=prompt_fd),
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,  # streamed: the prompt too
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                pass_fds=(prompt_fd,) if prompt_fd is not None else (),
                **self.custody.popen_options(),
            )
        except OSError as exc:
            message = exc.strerror or type(exc).__name__
            return self._failed(
                request,
                Outcome.FAILED,
                render("text/runner_error.j2", kind="not_started", program=argv[0], message=message),
            )
        finally:
            if prompt_fd is not None:
                os.close(prompt_fd)
        with turn.lock:
            turn.proc = proc
            halted_before_start = turn.halted.is_set()
        if halted_before_start:
            _signal_leash(proc)
        listener: Listener | None = None
        try:
            head = Announcement(request.agent_session_id, request.on_agent_session)
            progress = (Answered if invocation.streamed else ProgressWatch)(request.on_progress, str(workdir))
            watch = ProviderWatch(self.provider_sink, account=self.account, clock=self._clock, progress=progress)
            out, err = Tail(proc.stdout, self.max_output_bytes, head, watch), Tail(proc.stderr, self.max_output_bytes)
            out.start()
            err.start()
            listener = _listen(proc, request, progress) if invocation.streamed else None
            if stdin_text is not None and listener is None:
                threading.Thread(target=_feed, args=(proc, stdin_text), daemon=True, name="pacer-runner-stdin").start()
            cut = self._wait(proc, turn, started + self.timeout_s, lambda: max(out.heard_at, err.heard_at))
        except BaseException:
            _kill_group(proc)  # never leave an agent running behind an error
            proc.wait()
            raise
        finally:
            if listener is not None:  # what was not handed to the agent waits for the next turn
                listener.feed.stop()
                listener.end()
        with turn.lock:
            turn.finished = True
        _kill_group(proc)  # the leash has ended what the agent left; this is for a leash that was killed
        out.join(READER_JOIN_SECONDS)
        err.join(READER_JOIN_SECONDS)
        wall_ms = int((time.monotonic() - started) * 1000)
        if head.said is not None:
            request = replace(request, agent_session_id=head.said)  # a turn cut off after the init line resumes it
        heard = list(watch.latest.values())
        result = self._result(request, proc.returncode, out, err, wall_ms, cut, turn.halted.is_set(), heard)
        # The model it ran, for the burn table: as its init line said, else as its command chose.
        return replace(result, model=head.model or outcomes.model_option(self.words))

    def _wait(
        self, proc: subprocess.Popen[bytes], turn: _Turn, deadline: float, heard_at: Callable[[], float]
    ) -> str | None:
        """Wait for the agent; on a halt, past the deadline or after `stall_s` without a byte
        from it (`heard_at`), ask the leash to stop it (it kills after the grace), and kill the
        leash's group should the leash itself not end.

        Returns why Pacer cut the turn short: "timeout", "stall", or None.
        """
        cut: str | None = None
        term_sent_at: float | None = None
        while True:
            now = time.monotonic()
            if term_sent_at is None and turn.halted.is_set():
                term_sent_at = now  # halt() already asked the leash
            if term_sent_at is None and now >= deadline:
                cut, term_sent_at = "timeout", now
                log.warning("turn ran past its %.0fs timeout; terminating pid %s", self.timeout_s, proc.pid)
                _signal_leash(proc)
            if term_sent_at is None and self.stall_s is not None and now - heard_at() >= self.stall_s:
                cut, term_sent_at = "stall", now
                log.warning("agent printed nothing for %gs: stalled; terminating pid %s", self.stall_s, proc.pid)
                _signal_leash(proc)
            if term_sent_at is not None and now - term_sent_at >= self.kill_grace_s + LEASH_MARGIN_SECONDS:
                _kill_group(proc)
                proc.wait()
                return cut
            step = POLL_SECONDS if term_sent_at is not None else min(POLL_SECONDS, max(deadline - now, 0.0))
            try:
                proc.wait(timeout=max(step, 0.001))
                return cut
            except subprocess.TimeoutExpired:
                continue

    def _result(
        self,
        request: TurnRequest,
        exit_code: int,
        out: Tail,
        err: Tail,
        wall_ms: int,
        cut: str | None,
        halted: bool,
        heard: list[ProviderReading],
    ) -> TurnResult:
        stdout, stderr = out.text(), err.text()
        report: outcomes.AgentReport | None = outcomes.parse_report(stdout)
        extra = {
            "exit_code": exit_code,
            "wall_ms": wall_ms,
            "program": self.words[0],
            "output_truncated": out.truncated or err.truncated,
            "subtype": report.subtype if report else None,
            "provider_readings": [as_plain(r) for r in heard],
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
        if report is not None and report.subtype == BUDGET_REACHED:  # it stopped itself at the cap it was given
            budget = f"{request.max_budget_usd:.2f}" if request.max_budget_usd is not None else None
            error = render("text/runner_error.j2", kind="budget", budget=budget)
            return replace(base, outcome=Outcome.HALTED, error=error, extra={**extra, "budget_reached": True})
        if cut == "timeout":
            error = render("text/runner_error.j2", kind="timeout", seconds=f"{self.timeout_s:g}")
            return replace(base, outcome=Outcome.FAILED_RETRYABLE, error=error)
        if cut == "stall":
            error = render("text/runner_error.j2", kind="stalled", silence=_silence(self.stall_s or 0.0))
            return replace(base, outcome=Outcome.FAILED_RETRYABLE, error=error, extra={**extra, "stalled": True})
        if exit_code == NOT_EXECUTABLE and stderr.startswith(CANNOT_RUN):
            return replace(
                base,
                outcome=Outcome.FAILED,
                error=render("text/runner_error.j2", kind="not_found", program=self.words[0]),
            )
        outcome, reset_at, failure = classify(exit_code, stdout, stderr, report, self._clock.now())
        refused = [r for r in heard if r.status == "rejected"]
        if outcome is not Outcome.SUCCESS and refused:
            # The provider said so in the stream: its reset, not a guess from the error's words.
            outcome = Outcome.RATE_LIMITED
            resets = [r.resets_at for r in refused if r.resets_at is not None]
            reset_at = max(resets) if resets else reset_at
            extra["rate_limit_kinds"] = [r.kind for r in refused]
        if outcome is Outcome.MODEL_ACCESS:
            # The queue hold names the model: as the refusal wrote it, else as the command chose it.
            extra["model"] = outcomes.refused_model(failure or "") or outcomes.model_option(self.words)
        if outcome is not Outcome.SUCCESS:
            log.info("turn %s of session %s: %s (%s)", request.turn_id, request.session_id, outcome.value, failure)
        return replace(base, outcome=outcome, error=failure, rate_limit_reset_at=reset_at, extra=extra)

    def _failed(self, request: TurnRequest, outcome: Outcome, error: str) -> TurnResult:
        log.warning("turn %s of session %s not started: %s", request.turn_id, request.session_id, error)
        return TurnResult(outcome=outcome, error=error, agent_session_id=request.agent_session_id)


__all__ = ["CommandRunner", "classify"]
