"""The ports: every piece of I/O the scheduler needs, each one or two methods wide.

Production adapters live in `integrations/`; tests and the simulator use the virtual ones in
`scheduler/testing.py`, never a mock of Pacer's own code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class Deferrer(Protocol):
    """One-shot alarm clocks under stable ids. The database row, not the alarm, is the truth."""

    def schedule(self, job_id: str, at: datetime, func: Callable[..., Any], *args: Any) -> None:
        """Arm (or re-arm, replacing) the alarm `job_id` to call func(*args) at `at`."""
        ...

    def cancel(self, job_id: str) -> bool:
        """Disarm; True when an alarm was armed."""
        ...

    def next_run(self, job_id: str) -> datetime | None:
        """When the alarm fires, or None when none is armed."""
        ...


class Outcome(StrEnum):
    SUCCESS = "success"
    FAILED_RETRYABLE = "failed_retryable"
    FAILED = "failed"  # not retryable
    UNREACHABLE = "unreachable"  # the provider could not be reached at all (retryable)
    RATE_LIMITED = "rate_limited"
    AUTH_REJECTED = "auth_rejected"
    CREDITS_EXHAUSTED = "credits_exhausted"
    MODEL_ACCESS = "model_access"  # the plan does not include the chosen model
    HALTED = "halted"  # stopped by Pacer (pause, preemption)


class TurnInbox(Protocol):
    """What people say to a session while its turn runs, for an agent that takes streamed input
    (Claude Code's `--input-format stream-json`): the runner opens it once the agent listens,
    takes the messages waiting as it goes (at most `limit`, what it has room for), and closes it
    when the agent has answered, taking the last ones (at most `take`); a message sent after that,
    or left, waits for the next turn. Each message (id, text) is taken once; one taken but never
    written to the agent is given back, for the next turn."""

    def open(self) -> None: ...

    def take(self, limit: int) -> list[tuple[int, str]]: ...

    def close(self, *, take: int) -> list[tuple[int, str]]: ...

    def give_back(self, ids: list[int]) -> None: ...


@dataclass(frozen=True)
class TurnRequest:
    session_id: int
    turn_id: int
    prompt: str
    attachments: Sequence[Mapping[str, Any]] = ()
    agent_session_id: str | None = None
    workdir: str | None = None
    runtime: str = "echo"
    # What the session may still spend under its cost cap (cap less its recorded spend); None
    # when it has no cap. A runner whose agent can stop itself at a budget passes it on (Claude
    # Code's --max-budget-usd): a backstop should Pacer's own halt at the cap come late.
    max_budget_usd: float | None = None
    # Called by the runner with the agent's own session id as soon as the agent states it, before
    # any result, so a turn cut off mid-way still re-runs with --resume. The workers that run
    # the turn give it (`integrations.turn_leases`); None: the result alone carries the id.
    on_agent_session: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    # Called by the runner, on its reader thread, each time what the agent is doing changes (the
    # tool in use, its todo list, its cost so far), as it reads the agent's stream. The workers
    # give it (`integrations.turn_progress`); None: nobody watches the turn as it runs.
    on_progress: Callable[[TurnProgress], None] | None = field(default=None, compare=False, repr=False)
    # The messages sent to the session while this turn runs, for a runner whose agent takes them
    # mid-turn; the workers give it (`integrations.turn_inbox`); None: they wait for the next turn.
    inbox: TurnInbox | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TodoItem:
    """One entry of the agent's own todo list (Claude Code's TodoWrite)."""

    content: str
    status: str  # pending | in_progress | completed
    active_form: str | None = None  # "Running the tests": how the agent says it while doing it


@dataclass(frozen=True)
class TurnProgress:
    """What a running turn's agent is doing, as its stream says so far. Each field is None until
    the stream says it: `todos` None means it keeps no todo list, () an empty one."""

    tool: str | None = None  # the tool it called last, by the agent's name for it (Bash, Edit, ...)
    detail: str | None = None  # what it called it on: a file, a pattern, the command's description
    todos: tuple[TodoItem, ...] | None = None
    cost_usd: float | None = None  # the turn's cost so far, when the stream states one
    tools_used: int = 0  # tool calls seen so far in this turn


@dataclass(frozen=True)
class TurnResult:
    outcome: Outcome
    cost_usd: float = 0.0
    output: str = ""
    duration_ms: int = 0
    agent_session_id: str | None = None
    error: str | None = None
    rate_limit_reset_at: datetime | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None  # the model the agent ran, as it said or its command chose; None: unknown


class Runner(Protocol):
    """Executes one turn. Blocking; called on a worker thread. `halt` stops it cleanly."""

    def run(self, request: TurnRequest) -> TurnResult: ...

    def halt(self, turn_id: int) -> bool: ...


@dataclass(frozen=True)
class ProviderReading:
    """One quota window as the provider itself reported it in an agent's output stream (Claude
    Code's `rate_limit_event`, Codex's `token_count`), read by the runner while the turn runs.

    `kind` is the provider's own name for the window (five_hour, seven_day, seven_day_opus, …);
    any field the event left out is None: an event is a partial word, never a guess."""

    provider: str  # "anthropic" | "openai"
    kind: str
    observed_at: datetime
    status: str | None = None  # allowed | allowed_warning | rejected
    utilization: float | None = None  # fraction of the window spent, 0-1 (may exceed 1)
    resets_at: datetime | None = None
    is_using_overage: bool | None = None
    overage_status: str | None = None
    account: str = "default"  # which account's agents said it (PACER_QUOTA_ACCOUNT)


ProviderSink = Callable[[ProviderReading], None]
"""Where a runner hands each provider reading, as soon as the agent prints it."""


@dataclass(frozen=True)
class AccountReading:
    """One account's latest reading of its two windows (pool quota source)."""

    name: str
    status: str  # active | quota_exceeded | needs_reauth
    utilization_5h: float | None  # 0-1, None when unread
    utilization_7d: float | None
    reset_5h: datetime | None = None
    reset_7d: datetime | None = None


@dataclass(frozen=True)
class WindowReading:
    """One quota window as a source reports it."""

    name: str  # "5h" | "7d"
    period_seconds: float
    utilization: float  # fraction of capacity spent, 0-1 (may exceed 1)
    resets_at: datetime
    capacity_usd: float | None  # None before calibration: the window is in fraction mode
    spent_usd: float | None = None
    measured_by: str | None = None  # the provider whose agents reported utilization and reset
    fallback: str | None = None  # why an estimate (the ledger's) stands in for the provider's word
    warned: bool = False  # the provider says an account is past its warning threshold (allowed_warning)
    using_overage: bool = False  # the provider says an account is spending overage (extra usage) on it
    accounts: int = 0  # the accounts whose readings made the figures (the provider's word only)
    buckets: int = 0  # the distinct buckets among them: accounts that report one shared bucket count once


@dataclass(frozen=True)
class QuotaReading:
    windows: Sequence[WindowReading]
    accounts: Sequence[AccountReading] = ()
    accounts_averaged: int = 0
    read_at: datetime | None = None


class QuotaSource(Protocol):
    def read(self, now: datetime) -> QuotaReading | None:
        """The windows now, or None when there is nothing to decide on (fail open)."""
        ...


class Notifier(Protocol):
    """Talks back to people: a session's thread, its GitHub issue, the ops channel."""

    def notify(self, event: str, context: Mapping[str, Any]) -> None: ...
