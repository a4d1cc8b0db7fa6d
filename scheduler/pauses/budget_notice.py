"""The early notice: a window's spot budget will run out soon at the present burn, and the
sessions it will pause are told once, before the ceiling pauses them (`scheduler.pauses.ceiling`).

  `running_out(windows, now, notice_minutes)`  pure: the gate's own `WindowFigures` (spot budget
      left, the fleet's burn) to the windows whose spot budget runs out within `notice_minutes`
      and before their rollover, each with when, earliest first. A window in fraction mode has
      no burn to project and is never named; nor is one already spent, since the ceiling pauses
      its sessions now and says so itself.
  `ending_now(work, policy, notice_minutes)`  the same figures the gate card shows (the whole
      running fleet's burn, the plain reserve), read once per sweep; and every window the
      provider itself warns about (`allowed_warning` in an agent's stream), projected or not:
      its notice runs out "by the rollover" (`RunOut.warned`), the latest it can.
  `tell(work, session_ids, ending)`  records the notice per session and window in
      `budget_notices` and emits `budget_ending` for each session told now. The record is taken
      over only once the window it named has rolled over, in one statement, so each window
      instance tells a session once whichever process runs the sweep and however often.
  `standing_notice(db, session_id, now)`  the notice still in force, for the status comment.
  `standing_notices(db, now)`  each running session's notice in force, for the live page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.engine.attempt import Work
from scheduler.engine.fleet import build_snapshot
from scheduler.rules.gate import WindowFigures, decide
from scheduler.rules.snapshot import Asking, PolicyView, window_label
from scheduler.store.db import core
from scheduler.store.models import BudgetNotice, Session, Status

EVENT = "budget_ending"
NOTICE_MINUTES = 30.0
_NOTICES = BudgetNotice.__table__  # type: ignore[attr-defined]

# Asks the gate for the figures of the fleet as it runs: a spot session that is no turn of the
# fleet and adds no burn of its own, so each window's fleet burn is every running turn's.
_OBSERVER = Asking(session_id=0, is_spot=True, already_running=True, spends_quota=True, burn_per_min=0.0)


@dataclass(frozen=True)
class RunOut:
    """A window whose spot budget runs out before its rollover, at the present burn."""

    window: str
    label: str
    at: datetime  # when the spot budget is spent: running spot work is paused then
    resets_at: datetime  # the rollover after which paused work resumes

    @property
    def warned(self) -> bool:
        """The provider warned of this window; no burn projected when it runs out."""
        return self.at >= self.resets_at

    def as_notice(self) -> dict[str, object]:
        return {"window": self.window, "label": self.label, "runs_out_at": self.at, "resets_at": self.resets_at}


def running_out(windows: Iterable[WindowFigures], now: datetime, notice_minutes: float) -> tuple[RunOut, ...]:
    """The windows whose spot budget the fleet's burn spends within `notice_minutes` and before
    the window rolls over, earliest first. Pure."""
    ending = []
    for w in windows:
        burn = w.fleet_burn
        if not w.calibrated or burn is None or burn <= 0 or w.spot_left <= 0:
            continue
        minutes = w.spot_left / burn
        if minutes <= notice_minutes and minutes < w.minutes_left:
            ending.append(RunOut(w.name, w.label, now + timedelta(minutes=minutes), w.resets_at))
    return tuple(sorted(ending, key=lambda r: r.at))


def ending_now(work: Work, policy: PolicyView, notice_minutes: float) -> tuple[RunOut, ...]:
    """`running_out` on the gate's figures now; nothing while the ceiling stops running work,
    since then it pauses the sessions this would warn."""
    if notice_minutes <= 0:
        return ()
    snapshot = build_snapshot(work.db, work.ctx, policy, work.reading)
    decision = decide(snapshot, _OBSERVER, work.now)
    if decision.stops_running_work:
        return ()
    projected = running_out(decision.windows, work.now, notice_minutes)
    named = {r.window for r in projected}
    warned = [
        RunOut(w.name, window_label(w.name), w.resets_at, w.resets_at)
        for w in (work.reading.windows if work.reading is not None else ())
        if w.warned and w.name not in named and w.resets_at > work.now
    ]
    return (*projected, *sorted(warned, key=lambda r: r.resets_at))


def tell(work: Work, session_ids: Sequence[int], ending: RunOut) -> list[int]:
    """Record and announce `ending` to each session not told about this window instance yet;
    the ids told now."""
    told = [sid for sid in session_ids if _recorded(work.db, sid, ending, work.now)]
    for sid in told:
        work.effects.notice(EVENT, session_id=sid, **ending.as_notice())
    return told


def _recorded(db: DBSession, session_id: int, ending: RunOut, now: datetime) -> bool:
    """Insert the notice, or take over one whose window has rolled over since; True when this
    call wrote it. One statement, so two processes racing cannot both write it."""
    insert = postgresql_insert if db.get_bind().dialect.name == "postgresql" else sqlite_insert
    values = {"session_id": session_id, "window": ending.window, "resets_at": ending.resets_at,
              "runs_out_at": ending.at, "sent_at": now}
    stmt = insert(_NOTICES).values(**values)
    upsert = stmt.on_conflict_do_update(
        index_elements=[_NOTICES.c.session_id, _NOTICES.c.window],
        set_={name: stmt.excluded[name] for name in ("resets_at", "runs_out_at", "sent_at")},
        where=_NOTICES.c.resets_at <= now,
    ).returning(_NOTICES.c.session_id)
    return core(db, upsert).first() is not None


def standing_notice(db: DBSession, session_id: int, now: datetime) -> RunOut | None:
    """The notice this session was given for a window that has not rolled over yet, the one
    that runs out first when there are two."""
    row = db.exec(
        select(BudgetNotice)
        .where(BudgetNotice.session_id == session_id, col(BudgetNotice.resets_at) > now)
        .order_by(col(BudgetNotice.runs_out_at))
    ).first()
    if row is None:
        return None
    return RunOut(row.window, window_label(row.window), row.runs_out_at, row.resets_at)


@dataclass(frozen=True)
class Standing:
    """A running session and the notice in force it was given."""

    session_id: int
    title: str
    ending: RunOut


def standing_notices(db: DBSession, now: datetime) -> list[Standing]:
    """`standing_notice` for every running session at once, the soonest to run out first."""
    rows = db.exec(
        select(BudgetNotice, Session.title)
        .join(Session, col(Session.id) == col(BudgetNotice.session_id))
        .where(col(BudgetNotice.resets_at) > now, Session.status == Status.RUNNING.value)
        .order_by(col(BudgetNotice.runs_out_at), col(BudgetNotice.session_id))
    )
    found: dict[int, Standing] = {}
    for row, title in rows:
        ending = RunOut(row.window, window_label(row.window), row.runs_out_at, row.resets_at)
        found.setdefault(row.session_id, Standing(row.session_id, title, ending))
    return list(found.values())
