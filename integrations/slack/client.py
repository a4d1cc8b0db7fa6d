"""The bot's Slack Web API client: one per process, shared by the listeners and the notifier."""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

WEB_API_TIMEOUT_SECONDS = 10


def web_client(*, token: str, base_url: str) -> WebClient:
    """A Web API client on `base_url`, retried on 429 as Slack asks."""
    client = WebClient(token=token, base_url=base_url, timeout=WEB_API_TIMEOUT_SECONDS)
    # Keep the default connection-error retry and add Slack's Retry-After handling.
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return client
