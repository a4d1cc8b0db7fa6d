"""What `/metrics` reads from the database at each scrape: the queue, the holds, the windows, the
turns, the re-checks and the preemptions.

Read from the rows, not counted in memory, so every Pacer process sharing one database (HTTP
replicas, the scheduler leader, workers) answers a scrape with the same numbers, and a restart
loses nothing: multi-process safe by construction. The turn counters and the duration histogram
are counts over `turns` rows, which Pacer never deletes, so they only grow as a counter must.
Every metric is described in docs/metrics.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, case, func, inspect, literal, or_, text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.observe.metrics_windows import fleet_families, window_families
from scheduler.front import (
    QUEUE_HOLD_REASONS,
    SELECTOR_KINDS,
    Context,
    GateReason,
    OperatorHold,
    QueueHold,
    Session,
    Status,
    Turn,
    build_card,
    class_expr,
    cycling_now,
    hold_job_id,
    load_policy,
    read_quota,
)

log = logging.getLogger("pacer.metrics")

# Turn durations, in seconds: agent turns run from seconds to an hour.
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
FINISHED = ("done", "failed", "halted")
JOB_TABLE = "apscheduler_jobs"
RECHECK_PREFIX = hold_job_id(0).removesuffix("0")
# The series a family always has, at 0 when nothing is counted, so an empty queue reads 0 on a
# dashboard rather than "no data", and an alert on it has a series to compare: each class's ready
# sessions; the gate's two hold reasons; every operator hold selector; every queue hold reason on
# the whole queue; and the finished turns that succeeded (counter and histogram).
QUEUE_ALWAYS = (("priority", "ready"), ("spot", "ready"))
SESSION_HOLDS_ALWAYS = (GateReason.AT_UTILIZATION_LIMIT.value, GateReason.FLEET_AT_CAP.value)
TURN_ALWAYS = ("done", "success")


def _seeded(always: Iterable[str], rows: Iterable[Any]) -> list[tuple[str, int]]:
    """(label, count) for every label in `always`, 0 unless `rows` count it, and every other label
    `rows` count."""
    counts = dict.fromkeys(always, 0)
    for label, count in rows:
        counts[str(label)] = int(count)
    return list(counts.items())


def waiting_reason_expr() -> Any:
    """Why a waiting session waits, as one label: its hold, else its pause, else its park, else
    `asleep` (a wake time ahead) or `ready` (nothing stops it but its turn in the queue)."""
    asleep = case((col(Session.wake_at).is_not(None), literal("asleep")), else_=literal("ready"))
    return func.coalesce(col(Session.hold_reason), col(Session.pause_reason), col(Session.park_reason), asleep)


class DatabaseCollector(Collector):
    """A prometheus-client Collector over Pacer's rows, read once per scrape."""

    def __init__(self, engine: Engine, ctx: Context) -> None:
        self.engine = engine
        self.ctx = ctx

    def describe(self) -> Iterable[Metric]:
        return []  # no read at registration: the names are Pacer's own and cannot clash

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pacer_database_up", "1 when the database answered this scrape, 0 when it did not")
        try:
            families = self._read(self.ctx.clock.now())
        except SQLAlchemyError as exc:  # a scrape reports an unreadable database rather than failing
            log.warning("metrics: the database could not be read for this scrape: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _read(self, now: datetime) -> list[Metric]:
        reading = read_quota(self.ctx, now)  # before the read transaction: a quota source may read the database
        with DBSession(self.engine) as db:
            policy = load_policy(db)
            families = [
                self._statuses(db), self._queue(db, class_expr(policy)), *self._holds(db, now),
                *self._turns(db), *self._preemptions(db, now), self._rechecks(db),
            ]
            card = build_card(db, self.ctx, reading, now)
        return families + window_families(card, now) + fleet_families(card)

    def _statuses(self, db: DBSession) -> Metric:
        family = GaugeMetricFamily("pacer_sessions", "Sessions by status", labels=["status"])
        found = dict(db.exec(select(Session.status, func.count()).group_by(Session.status)).all())
        for status in Status:
            family.add_metric([status.value], int(found.get(status.value, 0)))
        return family

    def _queue(self, db: DBSession, klass: Any) -> Metric:
        family = GaugeMetricFamily("pacer_queue_depth", "Waiting sessions by resolved class and the reason they wait",
                                   labels=["class", "reason"])
        reason = waiting_reason_expr()
        stmt = select(klass, reason, func.count()).where(Session.status == Status.WAITING.value).group_by(klass, reason)
        counts = dict.fromkeys(QUEUE_ALWAYS, 0)
        for klass_value, why, count in db.exec(stmt).all():
            counts[(str(klass_value), str(why))] = int(count)
        for (klass_value, why), count in counts.items():
            family.add_metric([klass_value, why], count)
        return family

    def _holds(self, db: DBSession, now: datetime) -> list[Metric]:
        sessions = GaugeMetricFamily("pacer_session_holds", "Waiting sessions the gate or a check held, by hold reason",
                                     labels=["reason"])
        held = (select(Session.hold_reason, func.count())
                .where(Session.status == Status.WAITING.value, col(Session.hold_reason).is_not(None))
                .group_by(Session.hold_reason))
        for reason, count in _seeded(SESSION_HOLDS_ALWAYS, db.exec(held).all()):
            sessions.add_metric([reason], count)
        operator = GaugeMetricFamily("pacer_operator_holds", "Operator holds in force, by what they select",
                                     labels=["selector"])
        live = (select(OperatorHold.selector_kind, func.count())
                .where(col(OperatorHold.released_at).is_(None),
                       or_(col(OperatorHold.expires_at).is_(None), col(OperatorHold.expires_at) > now))
                .group_by(OperatorHold.selector_kind))
        for selector, count in _seeded(SELECTOR_KINDS, db.exec(live).all()):
            operator.add_metric([selector], count)
        queue = GaugeMetricFamily("pacer_queue_holds", "Queue holds in force (the whole queue or one group), by reason",
                                  labels=["reason", "scope"])
        scope = case((col(QueueHold.group).is_(None), literal("queue")), else_=literal("group"))
        stopped = (select(QueueHold.reason, scope, func.count()).where(col(QueueHold.released_at).is_(None))
                   .group_by(QueueHold.reason, scope))
        in_force = dict.fromkeys(((reason, "queue") for reason in QUEUE_HOLD_REASONS), 0)
        for reason, where, count in db.exec(stopped).all():
            in_force[(str(reason), str(where))] = int(count)
        for (reason, where), count in in_force.items():
            queue.add_metric([reason, where], count)
        return [sessions, operator, queue]

    def _turns(self, db: DBSession) -> list[Metric]:
        """The outcome counter and the duration histogram from one pass over the finished turns."""
        ms = col(Turn.duration_ms)
        timed = ms.is_not(None)
        columns = [func.count(), func.sum(case((timed, 1), else_=0)), func.coalesce(func.sum(ms), 0)]
        columns += [func.sum(case((ms <= bound * 1000, 1), else_=0)) for bound in DURATION_BUCKETS]
        stmt = (select(Turn.status, Turn.outcome, *columns).where(col(Turn.status).in_(FINISHED))
                .group_by(col(Turn.status), col(Turn.outcome)))
        rows: list[Any] = list(db.exec(stmt).all())  # status, outcome, count, timed count, sum, one count per bucket
        outcomes = CounterMetricFamily(
            "pacer_turns", "Finished turns by status and outcome", labels=["status", "outcome"]
        )
        by_outcome: dict[str, list[float]] = {TURN_ALWAYS[1]: [0.0] * (len(DURATION_BUCKETS) + 2)}
        if not any((str(row[0]), str(row[1] or "")) == TURN_ALWAYS for row in rows):
            outcomes.add_metric(list(TURN_ALWAYS), 0)
        for row in rows:
            status, outcome, count, timed_count, total_ms, *within = tuple(row)
            outcomes.add_metric([str(status), str(outcome or "")], int(count))
            sums = by_outcome.setdefault(str(outcome or ""), [0.0] * (len(DURATION_BUCKETS) + 2))
            for i, value in enumerate([timed_count, total_ms, *within]):
                sums[i] += float(value or 0)
        durations = HistogramMetricFamily("pacer_turn_duration_seconds", "How long finished turns ran, by outcome",
                                          labels=["outcome"])
        for outcome, (count, total_ms, *within) in by_outcome.items():
            if count or outcome == TURN_ALWAYS[1]:
                buckets = [(str(bound), int(n)) for bound, n in zip(DURATION_BUCKETS, within, strict=True)]
                durations.add_metric([outcome], [*buckets, ("+Inf", int(count))], total_ms / 1000)
        return [outcomes, durations]

    def _preemptions(self, db: DBSession, now: datetime) -> list[Metric]:
        total = CounterMetricFamily(
            "pacer_preemptions", "Times a running spot session yielded its slot to priority work"
        )
        total.add_metric([], int(db.exec(select(func.coalesce(func.sum(Session.preemption_count), 0))).one()))
        marked = GaugeMetricFamily("pacer_preemption_marks", "Spot sessions marked to yield their slot now")
        marked.add_metric([], int(db.exec(select(func.count()).where(col(Session.preempt_mark_at).is_not(None))).one()))
        found = cycling_now(db, now)
        sessions = GaugeMetricFamily("pacer_preemption_cycling_sessions",
                                     "Sessions preempted at least 3 times in the last 24 h")
        sessions.add_metric([], len(found.sessions))
        pairs = GaugeMetricFamily("pacer_preemption_cycling_pairs",
                                  "Pairs of sessions with at least 2 preemptions between them in the last 24 h")
        pairs.add_metric([], len(found.pairs))
        lost = GaugeMetricFamily(
            "pacer_preemption_lost_usd",
            "What turns halted by preemption in the last 24 h had spent: "
            "of every preemption (all) and of the cycling sessions and pairs (cycling)",
            labels=["of"],
        )
        lost.add_metric(["all"], found.window_cost_lost_usd)
        lost.add_metric(["cycling"], found.cost_lost_usd)
        return [total, marked, sessions, pairs, lost]

    def _rechecks(self, db: DBSession) -> Metric:
        family = GaugeMetricFamily("pacer_rechecks_armed", "Held sessions' re-check alarms in the shared job store")
        armed = 0
        if inspect(db.connection()).has_table(JOB_TABLE):  # APScheduler makes its table when it first starts
            stmt = text(f"SELECT count(*) FROM {JOB_TABLE} WHERE id LIKE :prefix")  # noqa: S608 - a constant table name
            armed = int(db.connection().execute(stmt, {"prefix": RECHECK_PREFIX + "%"}).scalar_one())
        family.add_metric([], armed)
        return family
