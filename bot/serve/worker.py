"""`pacer worker`: a process that runs turns for every `pacer serve` on the database.

With PACER_TURN_QUEUE=procrastinate a started turn is a procrastinate job on queue `turns`
(`integrations.turn_queue`). This process takes up to PACER_AGENT_WORKERS of them at once, each on
its own thread, and runs them on the same leased pool `pacer serve` runs its own turns on: its
owner id and lease on each turn it claims, renewed every third of a lease, and the report through
`completion.complete_turn`. It arms alarms (the queue pass a finished turn asks for) in the shared
job store as a standby does; it never leads.

With PACER_WORKER_PORT set it answers GET /healthz there, at PACER_HOST (`worker_health`): what
fly.toml's check of the worker group asks.

On SIGTERM it takes no new job, lets the running turns finish for PACER_DRAIN_SECONDS, then hands
the rest back (`lifecycle.hand_over`, as `pacer serve`'s drain does) and stops their agents.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from bot.config.checks import database_problems, problems
from bot.config.settings import Settings
from bot.runtime import process
from bot.runtime.adapters import libpq_url
from bot.serve import worker_health
from bot.serve.worker_notices import WorkerNotices
from integrations.turn_queue import HOST, QUEUE, TurnHost, build_app
from scheduler.errors import ConfigError
from templates import error_text

log = logging.getLogger("pacer.worker")


def work(settings: Settings) -> int:
    """Run turns until SIGTERM or SIGINT."""
    if settings.turn_queue != "procrastinate":
        raise ConfigError(error_text("cli/worker_without_queue", queue=settings.turn_queue))
    refused = database_problems(settings, os.environ) + problems(settings, os.environ, serving=False)
    if refused:
        raise ConfigError(refused[0])
    pacer = process.build(settings, migrate=False)  # `pacer migrate` (or the first `pacer serve`) made the schema
    ctx = pacer.ctx
    if pacer.scheduler is not None:
        pacer.scheduler.start(paused=True)  # alarms go to the shared store; the leader fires them
    assert ctx.owner is not None and ctx.limits.turn_lease is not None  # build gives a process with its own pool both
    host = TurnHost(ctx, ctx.ports.workers, ctx.owner, ctx.limits.turn_lease, ctx.clock.now)
    notices = WorkerNotices(pacer)  # the status comment, the Slack thread, open App Homes
    health = None
    try:
        if settings.worker_port is not None:  # what a platform's health check asks (fly.toml's [checks.worker])
            health = worker_health.start(settings.host, settings.worker_port, pacer.engine)
        asyncio.run(_run(settings, host))
    finally:
        if health is not None:
            health.shutdown()
            health.server_close()
        process.stop(pacer)
        notices.close()
        pacer.engine.dispose()
    return 0


async def _run(settings: Settings, host: TurnHost) -> None:
    # procrastinate runs a sync task on the loop's default executor, which holds min(32, CPUs + 4)
    # threads: one a job, so PACER_AGENT_WORKERS turns run at once however few the CPUs.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=settings.agent_workers + 2, thread_name_prefix="pacer-job")
    )
    lease = settings.turn_lease_seconds
    app = build_app(libpq_url(settings.database_url))
    log.info("worker %s takes up to %s turns at once from queue %r", host.owner, settings.agent_workers, QUEUE)
    async with app.open_async():
        await app.run_worker_async(
            queues=[QUEUE],
            name=host.owner,
            concurrency=settings.agent_workers,
            additional_context={HOST: host},
            shutdown_graceful_timeout=settings.drain_seconds,
            # Its heartbeat beats as often as a turn lease is renewed: a dead worker's jobs are
            # found stalled (and ended by the lease sweep) about when its turns' leases run out.
            update_heartbeat_interval=lease / 3,
            stalled_worker_timeout=lease,
            abort_job_polling_interval=lease / 3,
            delete_jobs="successful",
        )


__all__ = ["work"]
