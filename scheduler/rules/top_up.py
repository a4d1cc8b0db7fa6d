"""The backlog top-up ceiling (seed 001, "Its sibling: the backlog top-up ceiling"): how little
running work means the fleet has room for more. Pure: a policy, the sweep's state, the running
count and `now` in; the next state and whether to fire out.

Max sessions at once says how much work may run; the top-up ceiling says how little. While fewer
sessions than the ceiling are running a turn, the fleet is *under its ceiling*, and the leader's
top-up sweep (`scheduler.pauses.top_up_sweep`) fires the `no_sessions_in_progress` event, which
`ao_event` triggers subscribe to, so the idle fleet is handed more work. Three operator-set
thresholds, in the policy row and its audit:

    ceiling   top_up_ceiling: the fleet is under it while fewer sessions than this run a turn.
              0 turns top-up off (no count is below 0).
    stretch   top_up_stretch_minutes: how long the fleet must have stayed under its ceiling
              before the event first fires, so a fleet dipping under for a moment between two
              turns is not handed work. 0 fires at the first sweep under the ceiling.
    cooldown  top_up_cooldown_minutes: the least time between two firings. While the fleet
              stays under, the event fires once per cooldown.

The count is sessions with a turn a worker is running, every runtime and every class: a backed-up
spot queue does not suppress top-up and waiting sessions do not count against it. It is not the
concurrency limit's count, which leaves out runtimes that spend no quota; both read the same
running turns (`scheduler.store.turn_reads.running_rows`). Pacer has no frozen categories to leave out.

"Under its ceiling since" is the moment the fleet crossed below its ceiling: sessions starting
and finishing underneath do not move it; only reaching the ceiling again clears it. So on a fleet
that stays under, the stretch is served once and the cadence is the cooldown alone. The last
firing is kept across crossings, so a fleet bouncing over and back under does not fire again
before its cooldown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.bounds import MAX_SESSIONS

EVENT = "no_sessions_in_progress"
MINUTES_IN_A_DAY = 24 * 60
TOP_UP_ATTRIBUTES = ("top_up_ceiling", "top_up_stretch_minutes", "top_up_cooldown_minutes")
# The short names `/pacer policy set` and `pacer policy --set` take.
TOP_UP_KEYS: Mapping[str, str] = dict(
    zip(("top_up", "top_up_stretch", "top_up_cooldown"), TOP_UP_ATTRIBUTES, strict=True)
)
# attribute -> (lowest, highest). A cooldown of 0 would fire on every sweep.
TOP_UP_RANGES: Mapping[str, tuple[int, int]] = {
    "top_up_ceiling": (0, MAX_SESSIONS),
    "top_up_stretch_minutes": (0, MINUTES_IN_A_DAY),
    "top_up_cooldown_minutes": (1, MINUTES_IN_A_DAY),
}


@dataclass(frozen=True)
class TopUpPolicy:
    ceiling: int = 3
    stretch_minutes: int = 0
    cooldown_minutes: int = 30

    @property
    def stretch(self) -> timedelta:
        return timedelta(minutes=self.stretch_minutes)

    @property
    def cooldown(self) -> timedelta:
        return timedelta(minutes=self.cooldown_minutes)


@dataclass(frozen=True)
class TopUpState:
    """What the sweep last wrote: when the fleet went under its ceiling (None: it is not under)
    and when the event last fired."""

    under_since: datetime | None = None
    fired_at: datetime | None = None


def is_under(policy: TopUpPolicy, running: int) -> bool:
    return running < policy.ceiling


def step(policy: TopUpPolicy, state: TopUpState, running: int, now: datetime) -> tuple[TopUpState, bool]:
    """The state after a sweep that counted `running` sessions at `now`, and whether the event
    fires: under the ceiling, for at least the stretch, and a cooldown since the last firing."""
    if not is_under(policy, running):
        return TopUpState(None, state.fired_at), False
    under_since = state.under_since or now
    served = now - under_since >= policy.stretch
    cooled = state.fired_at is None or now - state.fired_at >= policy.cooldown
    if served and cooled:
        return TopUpState(under_since, now), True
    return TopUpState(under_since, state.fired_at), False


def next_firing(policy: TopUpPolicy, state: TopUpState) -> datetime | None:
    """The earliest moment the event may fire again while the fleet stays under; None when it
    is not under its ceiling."""
    if state.under_since is None:
        return None
    earliest = state.under_since + policy.stretch
    if state.fired_at is not None:
        earliest = max(earliest, state.fired_at + policy.cooldown)
    return earliest
