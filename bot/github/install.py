"""Pacer's GitHub App put on repositories: each gets the labels Pacer reads.

GitHub sends an App these events whether or not it subscribed to them:

    installation.created                the App installed; `repositories` lists where
    installation_repositories.added     more repositories given to it; `repositories_added`

`installed` reads one (pure, never raises); `make_labels` creates `pacer:priority`, `pacer:hold`
and the label of each enabled github_label trigger that takes that repository, where they are
missing, after the answer, one log line per repository.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.events import HOLD_LABEL, MAX_INSTALLATION_ID, PRIORITY_LABEL
from bot.github.matching import DEFAULT_TRIGGER_LABEL
from integrations.github.comments import why_not_written
from integrations.github.labels import Label, LabelPort
from scheduler.bounds import is_repository
from scheduler.front import Trigger
from templates import error_text

log = logging.getLogger("pacer.github")

LISTS = {("installation", "created"): "repositories", ("installation_repositories", "added"): "repositories_added"}
LABELS = (
    Label(PRIORITY_LABEL, "d93f0b", "Pacer runs this issue's session as priority"),
    Label(HOLD_LABEL, "fbca04", "Pacer holds this issue's session until the label comes off"),
)
TRIGGER_COLOR = "0e8a16"
TRIGGER_DESCRIPTION = "Pacer starts work on an issue or pull request that gets this label"


@dataclass(frozen=True)
class Installed:
    installation_id: int | None
    repositories: tuple[str, ...]  # owner/name


def is_installation(event_name: str) -> bool:
    return event_name in {name for name, _ in LISTS}


def installed(event_name: str, payload: Mapping[str, Any]) -> Installed | None:
    """The repositories an installation event gives the App, or None for any other action."""
    key = LISTS.get((event_name, str(payload.get("action", ""))))
    if key is None:
        return None
    listed = payload.get(key)
    names = [item.get("full_name") for item in listed if isinstance(item, Mapping)] if isinstance(listed, list) else []
    installation = payload.get("installation")
    number = installation.get("id") if isinstance(installation, Mapping) else None
    valid = isinstance(number, int) and not isinstance(number, bool) and 0 < number <= MAX_INSTALLATION_ID
    repositories = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and is_repository(n)))
    return Installed(number if valid else None, repositories)


def trigger_labels(engine: Engine, repository: str) -> list[Label]:
    """The labels of the enabled github_label triggers that take `repository` (no `repositories`
    in a trigger's config means every repository)."""
    with DBSession(engine) as db:
        triggers = db.exec(
            select(Trigger)
            .where(Trigger.kind == "github_label", col(Trigger.enabled).is_(True))
            .order_by(col(Trigger.id))
        ).all()
    names: dict[str, str] = {}
    for trigger in triggers:
        config = trigger.config if isinstance(trigger.config, dict) else {}
        repositories = config.get("repositories")
        if (
            isinstance(repositories, list)
            and repositories
            and repository.lower() not in {str(r).lower() for r in repositories}
        ):
            continue
        name = str(config.get("label") or DEFAULT_TRIGGER_LABEL)
        names.setdefault(name.lower(), name)
    return [Label(name, TRIGGER_COLOR, TRIGGER_DESCRIPTION) for name in names.values()]


def make_labels(port: LabelPort, what: Installed, engine: Engine) -> None:
    """Create Pacer's labels on each repository; a refusal is one warning line saying what to do."""
    for repository in what.repositories:
        labels = [*LABELS, *trigger_labels(engine, repository)]
        try:
            made = port.ensure(repository, what.installation_id, labels)
        except Exception as exc:  # one line: the next repository is still worth trying
            log.warning(
                error_text(
                    "github_webhook/labels_not_made",
                    repository=repository,
                    problem=why_not_written(exc),
                    labels=[label.name for label in labels],
                )
            )
            continue
        log.info("github: labels on %s: %s", repository, ", ".join(made) + " made" if made else "all there already")
