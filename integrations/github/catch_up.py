"""What Pacer asks GitHub when it catches up on events it may have missed (`bot.github.catch_up`).

Two reads, each bounded in pages:

  * `AppDeliveries`: the GitHub App's webhook deliveries (`GET /app/hook/deliveries`, signed as
    the App with a JWT, newest first, paged by a cursor in the Link header) back to a time, and
    a redelivery (`POST /app/hook/deliveries/{id}/attempts`), never retried blind. Only an App
    has them: a personal token's hooks are the repository's, which Pacer does not own.
  * `OpenLabeled`: the repositories the credentials see (every installation's, or the token
    user's), the open issues and pull requests carrying a label, a pull request's own record
    (its branch), and who last added a label (the issue's events).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from integrations.github.client import GithubClients

PER_PAGE = 100
MAX_DELIVERY_PAGES = 50  # 5,000 deliveries per look: an hour of a busy App, with room
MAX_LIST_PAGES = 10  # repositories, labelled items per label, an issue's events: 1,000 each
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True)
class Delivery:
    """One attempt GitHub made to deliver an event (a redelivery is another attempt, same guid)."""

    id: int
    guid: str  # X-GitHub-Delivery
    delivered_at: datetime
    status: str  # "OK", or what went wrong ("Invalid HTTP Response: 503", "timed out", ...)
    status_code: int  # 0 when nothing answered
    event: str
    action: str | None
    redelivery: bool

    @property
    def ok(self) -> bool:
        return self.status == "OK" or 200 <= self.status_code < 300


class DeliveriesPort(Protocol):
    def recent(self, since: datetime) -> list[Delivery]: ...

    def redeliver(self, delivery_id: int) -> None: ...


class LabeledPort(Protocol):
    def repositories(self) -> list[tuple[str, int | None]]: ...

    def labeled(self, repository: str, installation_id: int | None, label: str) -> list[dict[str, Any]]: ...

    def pull(self, repository: str, installation_id: int | None, number: int) -> dict[str, Any]: ...

    def labeler(
        self, repository: str, installation_id: int | None, number: int, label: str
    ) -> dict[str, Any] | None: ...


class AppDeliveries:
    """`DeliveriesPort` over PyGithub's requester, signed as the App."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def recent(self, since: datetime) -> list[Delivery]:
        """Every attempt since `since`, newest first, at most MAX_DELIVERY_PAGES pages."""
        found: list[Delivery] = []
        for page in _pages(self.clients.app_requester(), "/app/hook/deliveries", MAX_DELIVERY_PAGES):
            for row in page:
                delivery = _delivery(row)
                if delivery is None:
                    continue
                if delivery.delivered_at < since:
                    return found  # newest first: the rest are older still
                found.append(delivery)
        return found

    def redeliver(self, delivery_id: int) -> None:
        self.clients.app_requester().requestJsonAndCheck("POST", f"/app/hook/deliveries/{int(delivery_id)}/attempts")


class OpenLabeled:
    """`LabeledPort` over PyGithub: an App's installations, or a personal token's user."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def repositories(self) -> list[tuple[str, int | None]]:
        if not self.clients.is_app:
            rows = _rows(self.clients.client(None).requester, "/user/repos", None)
            return [(str(r["full_name"]), None) for r in rows if isinstance(r, dict) and r.get("full_name")]
        found: list[tuple[str, int | None]] = []
        for installation in _rows(self.clients.app_requester(), "/app/installations", None):
            iid = installation.get("id") if isinstance(installation, dict) else None
            if not isinstance(iid, int):
                continue
            requester = self.clients.client(iid).requester
            for repo in _rows(requester, "/installation/repositories", "repositories"):
                if isinstance(repo, dict) and repo.get("full_name"):
                    found.append((str(repo["full_name"]), iid))
        return found

    def labeled(self, repository: str, installation_id: int | None, label: str) -> list[dict[str, Any]]:
        requester = self.clients.client(installation_id).requester
        params = {"labels": label, "state": "open"}
        return [r for r in _rows(requester, f"/repos/{repository}/issues", None, params) if isinstance(r, dict)]

    def pull(self, repository: str, installation_id: int | None, number: int) -> dict[str, Any]:
        _headers, data = self.clients.client(installation_id).requester.requestJsonAndCheck(
            "GET", f"/repos/{repository}/pulls/{int(number)}"
        )
        return data if isinstance(data, dict) else {}

    def labeler(
        self, repository: str, installation_id: int | None, number: int, label: str
    ) -> dict[str, Any] | None:
        """Who last added `label` (GitHub's `actor`: login and type), or None if no event says."""
        requester = self.clients.client(installation_id).requester
        last = None
        for row in _rows(requester, f"/repos/{repository}/issues/{int(number)}/events", None):
            if not isinstance(row, dict) or not isinstance(row.get("label"), dict):
                continue
            name = row["label"].get("name")
            if row.get("event") == "labeled" and isinstance(name, str) and name.lower() == label.lower():
                last = row.get("actor") if isinstance(row.get("actor"), dict) else None
        return last


def _pages(requester: Any, url: str, limit: int, params: dict[str, Any] | None = None) -> Iterator[list[Any]]:
    """Each page's rows, following the Link header's `next` (a cursor or a page number)."""
    next_url: str | None = url
    parameters: dict[str, Any] | None = {"per_page": PER_PAGE, **(params or {})}
    for _ in range(limit):
        if next_url is None:
            return
        headers, data = requester.requestJsonAndCheck("GET", next_url, parameters=parameters)
        yield data if isinstance(data, list) else [data]
        link = next((v for k, v in (headers or {}).items() if k.lower() == "link"), "")
        match = _NEXT.search(link or "")
        next_url, parameters = (match.group(1), None) if match else (None, None)


def _rows(requester: Any, url: str, key: str | None, params: dict[str, Any] | None = None) -> list[Any]:
    rows: list[Any] = []
    for page in _pages(requester, url, MAX_LIST_PAGES, params):
        for item in page:
            if key is not None and isinstance(item, dict):
                rows.extend(item.get(key) or [])
            else:
                rows.append(item)
    return rows


def _delivery(row: Any) -> Delivery | None:
    if not isinstance(row, dict) or not isinstance(row.get("id"), int) or not row.get("guid"):
        return None
    try:
        at = datetime.fromisoformat(str(row.get("delivered_at")).replace("Z", "+00:00"))
    except ValueError:
        return None
    code = row.get("status_code")
    return Delivery(
        id=row["id"], guid=str(row["guid"]), delivered_at=at if at.tzinfo else at.replace(tzinfo=UTC),
        status=str(row.get("status") or ""), status_code=code if isinstance(code, int) else 0,
        event=str(row.get("event") or ""), action=row.get("action") if isinstance(row.get("action"), str) else None,
        redelivery=bool(row.get("redelivery")),
    )
