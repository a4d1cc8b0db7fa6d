"""Declared prerequisites as rows (seed 002, "Declared prerequisites are honoured"): what
`depends on #12` and `@#12` in the text that starts a session mean, and the `prerequisites` rows
that record them when the session is created. Whether a recorded prerequisite is satisfied, and
the queue hold it may place, is the holds' (`scheduler/holds/prerequisites.py`).

What a reference means:
  `owner/repo#12`   issue 12 of that repository
  `#12`, `@#12`     issue 12 of this session's own repository (`source["repository"]`) when it
                    came from GitHub; otherwise Pacer session #12
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.bounds import NAME_PATTERN, OWNER_PATTERN
from scheduler.store.models import Prerequisite, Session

log = logging.getLogger("pacer.prerequisites")

MAX_PER_SESSION = 20  # an issue body listing more is recorded up to here, with a log line

_REF = rf"(?:(?P<repo>{OWNER_PATTERN}/{NAME_PATTERN}))?#(?P<num>[0-9]{{1,9}})\b"
_MENTION = re.compile(r"(?<![\w@/])@" + _REF)
_DEPENDS = re.compile(r"\bdepends\s+on\b\s*:?", re.IGNORECASE)
_LIST_ITEM = re.compile(r"\s*(?:(?:,|&|\band\b)\s*)?" + _REF, re.IGNORECASE)


@dataclass(frozen=True)
class PrerequisiteRef:
    number: int
    repository: str | None = None  # None: a bare "#n", resolved against the session


def parse_prerequisites(text: str) -> list[PrerequisiteRef]:
    """Every `depends on <ref>[, <ref> and <ref>…]` and `@<ref>` in `text`, in order of mention."""
    seen: list[tuple[int, PrerequisiteRef]] = []
    for head in _DEPENDS.finditer(text):
        pos = head.end()
        while (item := _LIST_ITEM.match(text, pos)) is not None:
            seen.append((item.start("num"), _ref(item)))
            pos = item.end()
    seen.extend((m.start("num"), _ref(m)) for m in _MENTION.finditer(text))
    found: list[PrerequisiteRef] = []
    for _pos, ref in sorted(seen, key=lambda pair: pair[0]):
        if ref.number >= 1 and ref not in found:
            found.append(ref)
    return found


def _ref(match: re.Match[str]) -> PrerequisiteRef:
    repo = match.group("repo")
    return PrerequisiteRef(int(match.group("num")), repo.lower() if repo else None)


def repository_of(session: Session) -> str | None:
    repo = (session.source or {}).get("repository")
    return str(repo).lower() if isinstance(repo, str) and "/" in repo else None


def issue_of(session: Session) -> int | None:
    source = session.source or {}
    for key in ("issue", "number"):
        value = source.get(key)
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return int(value)
    return None


def record_prerequisites(db: DBSession, session: Session, text: str) -> list[Prerequisite]:
    """Record what `text` declares for `session` (intake calls this with the title and body).
    Idempotent: a redelivered event records nothing twice. Returns the session's rows."""
    own_repo, own_issue = repository_of(session), issue_of(session)
    existing = {(p.target_kind, p.target_ref) for p in recorded_prerequisites(db, session.id or 0)}
    for ref in parse_prerequisites(text):
        repo = ref.repository or own_repo
        if repo is not None:
            kind, target = "issue", f"{repo}#{ref.number}"
            if repo == own_repo and ref.number == own_issue:
                continue  # a session cannot wait on itself
        else:
            kind, target = "session", str(ref.number)
            if ref.number == session.id:
                continue
        if (kind, target) in existing:
            continue
        if len(existing) >= MAX_PER_SESSION:
            log.warning(
                "session #%s declares more than %d prerequisites; the rest are not recorded",
                session.id,
                MAX_PER_SESSION,
            )
            break
        db.add(Prerequisite(session_id=session.id or 0, target_kind=kind, target_ref=target))
        existing.add((kind, target))
    db.flush()
    return recorded_prerequisites(db, session.id or 0)


def recorded_prerequisites(db: DBSession, session_id: int) -> list[Prerequisite]:
    """The prerequisites recorded for a session, in the order they were recorded."""
    return list(
        db.exec(select(Prerequisite).where(Prerequisite.session_id == session_id).order_by(col(Prerequisite.id)))
    )
