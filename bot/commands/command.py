"""What a parsed `/pacer` command is: one small frozen dataclass per subcommand, with typed
fields. The parser makes them, roles judge them, the chat handler executes them; none of the
three needs to look at the text again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Literal

from bot.commands.times import TimeSpec
from scheduler.front import ClaimChange

RankPlace = Literal["value", "top", "above", "below", "between"]
NewRank = int | Literal["top"]  # a new session's precedence, or the head of the spot queue
SelectorKind = Literal["session", "genesis", "trigger", "repository", "label", "class", "all"]


@dataclass(frozen=True)
class Help:
    name: ClassVar[str] = "help"
    topic: str | None = None


@dataclass(frozen=True)
class Queue:
    """`scheduling_class` None shows both classes; `every_status` is the `all` view."""

    name: ClassVar[str] = "queue"
    scheduling_class: str | None = None
    every_status: bool = False
    genesis: str | None = None


@dataclass(frozen=True)
class Holds:
    name: ClassVar[str] = "holds"


@dataclass(frozen=True)
class Burn:
    """The $/min table: each runtime + model's burn rate, as the gate projects with it."""

    name: ClassVar[str] = "burn"


@dataclass(frozen=True)
class Why:
    name: ClassVar[str] = "why"
    session_id: int


@dataclass(frozen=True)
class Promote:
    name: ClassVar[str] = "promote"
    session_id: int


@dataclass(frozen=True)
class Demote:
    name: ClassVar[str] = "demote"
    session_id: int
    top: bool = False


@dataclass(frozen=True)
class Rank:
    """`value` carries `precedence`; `above`/`below` one neighbour id; `between` two."""

    name: ClassVar[str] = "rank"
    session_id: int
    place: RankPlace
    precedence: int | None = None
    neighbours: tuple[int, ...] = ()


@dataclass(frozen=True)
class Start:
    name: ClassVar[str] = "start"
    session_id: int


@dataclass(frozen=True)
class Restart:
    name: ClassVar[str] = "restart"
    session_id: int


@dataclass(frozen=True)
class Weight:
    """A session's weight on the slot budget (seed 000): 0 adds no load but keeps its turn."""

    name: ClassVar[str] = "weight"
    session_id: int
    claim: ClaimChange


@dataclass(frozen=True)
class Capacity:
    """A session's own slot budget: a whole number, a multiple of the fleet's, or the fleet's."""

    name: ClassVar[str] = "capacity"
    session_id: int
    claim: ClaimChange


@dataclass(frozen=True)
class Cap:
    """A session's cost cap in US dollars; None clears it."""

    name: ClassVar[str] = "cap"
    session_id: int
    cost_cap_usd: float | None


@dataclass(frozen=True)
class Pause:
    """`until` None parks the session in the spot queue with no wake-up time; `halt` (a park
    only) stops its running turn; `resume_prompt` is what it is given when it comes back."""

    name: ClassVar[str] = "pause"
    session_id: int
    until: TimeSpec | None = None
    halt: bool = False
    resume_prompt: str | None = None


@dataclass(frozen=True)
class Archive:
    name: ClassVar[str] = "archive"
    session_id: int


@dataclass(frozen=True)
class Stop:
    """Halt the session's running turn, if any, and end it (archived): `lifecycle.stop`."""

    name: ClassVar[str] = "stop"
    session_id: int


@dataclass(frozen=True)
class Selector:
    """Which sessions an operator hold covers; `values` holds ids for `session`, else one value."""

    kind: SelectorKind
    values: tuple[str, ...] = ()

    @property
    def session_ids(self) -> tuple[int, ...]:
        return tuple(int(v) for v in self.values) if self.kind == "session" else ()

    @property
    def stored_value(self) -> str:
        """The form kept in `operator_holds.selector_value`."""
        return ",".join(self.values)

    def __str__(self) -> str:
        if self.kind == "all":
            return "all"
        if self.kind == "session":
            return ", ".join(f"#{v}" for v in self.values)
        prefix = "repo" if self.kind == "repository" else self.kind
        return f"{prefix}:{self.stored_value}"


@dataclass(frozen=True)
class Hold:
    name: ClassVar[str] = "hold"
    selector: Selector
    ttl: timedelta | None = None
    reason: str = ""


@dataclass(frozen=True)
class Release:
    name: ClassVar[str] = "release"
    hold_id: int


@dataclass(frozen=True)
class Resume:
    """`group` None resumes the global queue hold."""

    name: ClassVar[str] = "resume"
    group: str | None = None


@dataclass(frozen=True)
class PolicyShow:
    name: ClassVar[str] = "policy"


@dataclass(frozen=True)
class PolicySet:
    """`changes` in policy attribute names with typed values; `overrides` genesis -> class,
    None meaning back to the genesis default; `budgets` runtime -> US dollars, None removing
    the budget; `reset_spend` the runtimes whose spend counts from now."""

    name: ClassVar[str] = "policy"
    changes: tuple[tuple[str, bool | float | int], ...] = ()
    overrides: tuple[tuple[str, str | None], ...] = ()
    budgets: tuple[tuple[str, float | None], ...] = ()
    reserves: tuple[tuple[str, float | None], ...] = ()  # a per-model bucket -> its reserve %, None: the default
    reset_spend: tuple[str, ...] = ()
    temporary_max: tuple[int | None, timedelta | None] | None = None  # (n, for how long); (None, None) clears

    def merged(self) -> dict[str, dict[str, Any]]:
        """The maps to merge onto the policy in force, as `set_policy` takes them."""
        return {
            "genesis_class_overrides": dict(self.overrides),
            "cost_budgets": dict(self.budgets),
            "window_reserves": dict(self.reserves),
        }


@dataclass(frozen=True)
class TriggerShow:
    """Read one trigger: the class it stamps (or that its sessions derive), its precedence."""

    name: ClassVar[str] = "trigger"
    trigger_id: int


@dataclass(frozen=True)
class TriggerClass:
    """`scheduling_class` None is `default`: the trigger stops stamping a class."""

    name: ClassVar[str] = "trigger"
    trigger_id: int
    scheduling_class: str | None


@dataclass(frozen=True)
class TriggerPrecedence:
    name: ClassVar[str] = "trigger"
    trigger_id: int
    precedence: int


@dataclass(frozen=True)
class New:
    name: ClassVar[str] = "new"
    prompt: str
    spot: bool = False
    repository: str | None = None
    claim: ClaimChange = ClaimChange()
    cost_cap_usd: float | None = None
    rank: NewRank | None = None  # None: --spot's head of the spot queue, else the default


@dataclass(frozen=True)
class WhatIf:
    """`session_id` None with `spot` asks about a new spot session."""

    name: ClassVar[str] = "whatif"
    session_id: int | None = None
    spot: bool = False


@dataclass(frozen=True)
class Summary:
    """A status summary of a session, written by Pacer's own bookkeeping (seed 001)."""

    name: ClassVar[str] = "summary"
    session_id: int


@dataclass(frozen=True)
class ThreadReply:
    """A reply in a session's thread, typed in a terminal: a human message on that session."""

    name: ClassVar[str] = "reply"
    session_id: int
    text: str


Command = (
    Help
    | Queue
    | Holds
    | Burn
    | Why
    | Promote
    | Demote
    | Rank
    | Start
    | Restart
    | Weight
    | Capacity
    | Cap
    | Pause
    | Archive
    | Stop
    | Hold
    | Release
    | Resume
    | PolicyShow
    | PolicySet
    | TriggerShow
    | TriggerClass
    | TriggerPrecedence
    | New
    | WhatIf
    | Summary
    | ThreadReply
)


def verb(command: Command) -> str:
    """How a denial names the command: `policy set`, `trigger class`, `rank`."""
    if isinstance(command, PolicySet):
        return "policy set"
    if isinstance(command, TriggerClass):
        return "trigger class"
    if isinstance(command, TriggerPrecedence):
        return "trigger precedence"
    return command.name
