"""PyGithub clients, one per GitHub App installation (or one for a personal token), shared by
the status comments and the pull requests, with the bounds both need.

PyGithub is bounded: a few retries, never a POST retried blind (a create is found again by what
it made instead), and `max_rate_limit_wait` caps any sleep for a rate limit.
"""

from __future__ import annotations

import threading
from typing import Any

MAX_RATE_LIMIT_WAIT_SECONDS = 60
RETRIES = 3
TIMEOUT_SECONDS = 10


class GithubClients:
    """`client(installation_id)`: a PyGithub client as the App's installation, or with the token;
    `token(installation_id)`: the credential git may use for that installation's repositories."""

    def __init__(
        self, *, base_url: str, token: str | None = None, app_id: str | None = None, private_key: str | None = None,
        write_seconds: float = 1.0,
    ) -> None:
        if not token and not (app_id and private_key):
            raise ValueError("a GitHub client needs a token, or an App id and private key")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._app = (app_id, private_key) if app_id and private_key else None
        self._write_seconds = write_seconds
        self._clients: dict[int | str | None, Any] = {}
        self._auths: dict[int | None, Any] = {}
        self._lock = threading.Lock()

    def client(self, installation_id: int | None) -> Any:
        from github import Github, GithubRetry

        key = installation_id if self._app else None
        with self._lock:
            if key in self._clients:
                return self._clients[key]
        auth = self._auth(installation_id)
        # No blind POST retry: a create that failed after GitHub acted is found again instead.
        retry = GithubRetry(total=RETRIES, max_rate_limit_wait=MAX_RATE_LIMIT_WAIT_SECONDS,
                            allowed_methods=frozenset({"GET", "HEAD", "PATCH"}))
        # GitHub asks a second between writes (its secondary rate limits); PyGithub spaces them. Zero
        # (a stand-in on loopback) spaces nothing, reads included.
        client = Github(base_url=self.base_url, auth=auth, retry=retry, timeout=TIMEOUT_SECONDS, **self._spacing())
        with self._lock:
            return self._clients.setdefault(key, client)

    def _spacing(self) -> dict[str, Any]:
        return (
            {"seconds_between_writes": self._write_seconds} if self._write_seconds > 0
            else {"seconds_between_requests": None, "seconds_between_writes": None}
        )

    @property
    def is_app(self) -> bool:
        return self._app is not None

    def app_requester(self) -> Any:
        """PyGithub's requester signed as the App itself (a JWT): `/app/...` endpoints. Only for an App."""
        from github import Auth, GithubIntegration, GithubRetry

        if self._app is None:
            raise LookupError("only a GitHub App (not a personal token) can read the App's webhook deliveries")
        with self._lock:
            integration = self._clients.get("app")
            if integration is None:
                integration = GithubIntegration(
                    base_url=self.base_url, auth=Auth.AppAuth(self._app[0], self._app[1]), timeout=TIMEOUT_SECONDS,
                    retry=GithubRetry(total=RETRIES, max_rate_limit_wait=MAX_RATE_LIMIT_WAIT_SECONDS,
                                      allowed_methods=frozenset({"GET", "HEAD"})),  # a redelivery is never sent twice
                    **self._spacing(),
                )
                self._clients["app"] = integration
        return integration.requester

    def token(self, installation_id: int | None) -> str:
        """A token for git's fetch and push: the installation's (renewed by PyGithub before it
        expires), or the personal token."""
        if self._app is None:
            return str(self._token)
        return str(self._auth(installation_id).token)

    def _auth(self, installation_id: int | None) -> Any:
        from github import Auth

        if self._app is None:
            return Auth.Token(str(self._token))
        if installation_id is None:
            raise LookupError("a GitHub App needs the installation id the event came with; this session has none")
        with self._lock:
            auth = self._auths.get(installation_id)
            if auth is None:
                auth = Auth.AppAuth(self._app[0], self._app[1]).get_installation_auth(installation_id)
                self._auths[installation_id] = auth
            return auth
