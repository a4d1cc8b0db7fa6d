"""Who an API call speaks for, as its bearer token proves it.

    a personal token (PACER_API_TOKENS)   its holder, a rostered person, with their own role;
                                          X-Pacer-Actor may repeat their name, never another
    the shared token (PACER_API_TOKEN)    automation: audited as "api token", acting with
                                          PACER_API_ROLE (member unless set); X-Pacer-Actor must
                                          be absent or blank

A header is not proof: anyone holding the shared token could write any name into it, so a
shared token that spoke for the person its header named made every audit line a claim. A
person speaks through their own token; a bridge that acts for people carries theirs.

Tokens are compared in constant time: a personal token by its SHA-256 against every holder's
(none is skipped, so the time says nothing about which matched), the shared token as given.
No token is logged or echoed in an error.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.chat.roles import Role, role_of
from bot.config.rules import token_digest
from scheduler.errors import Forbidden
from templates import error_text

ACTOR_HEADER = "X-Pacer-Actor"
AUTOMATION = "api token"  # the name the shared token is audited under
DEMO_TOKEN_KEY = "demo_api_token"  # pacer.extras: the token `pacer serve --demo` made up


class Unauthorized(Exception):
    """No token is configured, none was sent, or it is not one of them (401)."""


@dataclass(frozen=True)
class Caller:
    """Who is calling: `name` is the person's roster name, or AUTOMATION for the shared token."""

    name: str
    role: Role
    person: bool

    @property
    def actor(self) -> str | None:
        """The person, where a row records one (a human message); None for automation."""
        return self.name if self.person else None

    def require_operator(self, what: str) -> None:
        if self.role is not Role.OPERATOR:
            raise Forbidden(
                error_text(
                    "api/needs_operator", what=what, actor=self.name, role=self.role.value, automation=not self.person
                )
            )

    def require_owner(self, what: str, requester: str | None) -> None:
        """A member may steer only the sessions they requested; an operator, any."""
        if self.role is Role.OPERATOR or requester == self.name:
            return
        raise Forbidden(error_text("api/needs_owner", what=what, requester=requester, actor=self.name))


def shared_token(pacer: Any) -> str | None:
    token = pacer.settings.api_token or pacer.extras.get(DEMO_TOKEN_KEY)
    return str(token) if token else None


def holder_of(tokens: Mapping[str, str], given: str) -> str | None:
    """The person whose personal token `given` is, or None."""
    digest = token_digest(given).encode()
    found = None
    for holder, known in tokens.items():
        if hmac.compare_digest(digest, known.encode()):
            found = holder
    return found


def identify(pacer: Any, given: str) -> tuple[str, bool] | None:
    """(name, is a person) for the holder of the token `given`, or None when it is no token here."""
    person = holder_of(pacer.settings.personal_tokens, given)
    shared = shared_token(pacer)
    is_shared = shared is not None and hmac.compare_digest(given.encode(), shared.encode())
    if person is not None:
        return person, True
    return (AUTOMATION, False) if is_shared else None


def bearer(headers: Mapping[str, str]) -> str | None:
    scheme, _, given = headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" and given.strip() else None


def identify_caller(pacer: Any, headers: Mapping[str, str]) -> Caller:
    """The caller the request's bearer token proves; Unauthorized or Forbidden otherwise."""
    settings = pacer.settings
    if not shared_token(pacer) and not settings.personal_tokens:
        raise Unauthorized(error_text("api/token_not_configured"))
    given = bearer(headers)
    if given is None:
        raise Unauthorized(error_text("api/token_missing"))
    found = identify(pacer, given)
    if found is None:
        raise Unauthorized(error_text("api/token_wrong"))
    name, person = found
    named = (headers.get(ACTOR_HEADER) or "").strip()
    if not person:
        if named:
            raise Forbidden(error_text("api/shared_token_names_actor", header=ACTOR_HEADER, actor=named))
        return Caller(AUTOMATION, Role(settings.api_role), person=False)
    if named and named != name:
        raise Forbidden(error_text("api/token_of_another", header=ACTOR_HEADER, actor=named, holder=name))
    role = role_of(settings.roster, name)
    if role is None:  # the roster changed under a running process's settings; start-up refuses it
        raise Forbidden(error_text("api/not_rostered", header=ACTOR_HEADER, actor=name))
    return Caller(name, role, person=True)


__all__ = [
    "ACTOR_HEADER",
    "AUTOMATION",
    "Caller",
    "Unauthorized",
    "bearer",
    "identify",
    "identify_caller",
    "shared_token",
]
