"""Every error Pacer raises on purpose.

    PacerError
    ├── ConfigError          a setting broke its rule; start-up stops with one line
    ├── InvalidInput         an argument a person or a caller gave is not allowed
    │   └── CommandError     a slash/console command did not parse; carries the usage line
    ├── NotFound             the session, trigger or hold named does not exist
    ├── Forbidden            the actor's role does not allow this
    ├── Refused              the request is valid but the state refuses it (asleep, busy group…)
    ├── StoreUnavailable     the database could not be read; callers fail open where the seed says so
    └── AlarmInTransaction   a programming error: an alarm or notice inside an open transaction

A message states the rule and, where there is one, the fix.
"""

from __future__ import annotations


class PacerError(Exception):
    """Base of every deliberate Pacer error."""


class ConfigError(PacerError):
    """A setting broke its rule. The message names the setting and the rule."""


class InvalidInput(PacerError):
    """A caller's argument is not allowed; nothing was changed."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class CommandError(InvalidInput):
    """A command could not be parsed. `usage` is the line to show beside the message."""

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class NotFound(PacerError):
    """The thing named does not exist."""


class Forbidden(PacerError):
    """The actor's role does not allow the action."""


class Refused(PacerError):
    """The request is well formed, but the current state refuses it."""


class StoreUnavailable(PacerError):
    """The store could not be read."""


class AlarmInTransaction(PacerError):
    """An alarm was armed, read or cancelled, or a notice sent, while this thread held a database
    transaction open. On SQLite the job store would wait on that transaction for ever; effects
    are applied after commit."""
