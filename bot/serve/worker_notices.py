"""What a `pacer worker` says about the turns it ends.

A turn's end is decided where the turn ran: on a worker machine, `complete_turn` emits its notices
(done, failed, held, queue holds …) in the worker process. They must reach the same places they
reach from `pacer serve` — the issue's sticky status comment, the session's Slack thread and DMs,
and the App Homes people have open — or a session run on a worker would finish in silence. So
the worker joins the same notifiers to its own chain, posting off the turn's thread on a small
pool of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from bot.runtime.notices import install_status_comments
from bot.runtime.process import Pacer
from bot.slack.notices import SlackNotices, install_slack_notices
from integrations.slack.client import web_client
from integrations.tracked_pool import run_guarded

log = logging.getLogger("pacer.worker")

POSTING_THREADS = 2


class WorkerNotices:
    """The notifiers a worker adds, and the pool they post from; `close` drains it."""

    def __init__(self, pacer: Pacer) -> None:
        self._pool = ThreadPoolExecutor(max_workers=POSTING_THREADS, thread_name_prefix="pacer-notice")
        self._slack: SlackNotices | None = None
        install_status_comments(pacer)
        settings = pacer.settings
        if not settings.slack_bot_token:
            return
        client = web_client(token=settings.slack_bot_token, base_url=settings.slack_api_url)
        self._slack = install_slack_notices(pacer, client, self.submit)

    def submit(self, what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._pool.submit(run_guarded, log, f"worker: {what}", func, *args)

    def close(self) -> None:
        if self._slack is not None:
            self._slack.close()
        self._pool.shutdown(wait=True)
