"""Reading the words of a command one at a time: the cursor the grammar's subcommand parsers
share, with the id and integer readers every one of them uses. Every failure is a CommandError
carrying the subcommand's usage line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from scheduler import bounds
from scheduler.errors import CommandError, InvalidInput
from scheduler.front import Genesis
from templates import error_text

T = TypeVar("T")

INT_PATTERN = re.compile(r"[+-]?\d{1,12}", re.ASCII)
ID_PATTERN = re.compile(r"#?(\d{1,12})", re.ASCII)


def shown(token: str) -> str:
    """A token quoted for an error line: repr escapes anything unprintable, and long input is cut."""
    return repr(token if len(token) <= 40 else token[:37] + "...")


@dataclass(frozen=True)
class Token:
    text: str
    start: int


class Cursor:
    """The words after the subcommand, with the raw text kept for free-text tails."""

    def __init__(self, source: str, tokens: list[Token], usage: str) -> None:
        self.source = source
        self.tokens = tokens
        self.position = 0
        self.usage = usage

    def fail(self, sentence: str, **values: Any) -> CommandError:
        """This command's error: `sentence` names a macro in templates/errors/command.j2."""
        return CommandError(error_text(f"command/{sentence}", **values), self.usage)

    def relay(self, exc: InvalidInput) -> CommandError:
        """A shared check's refusal (its sentence already rendered), with this command's usage."""
        return CommandError(str(exc), self.usage)

    def repository(self, value: str, field: str) -> str:
        """`value` as "owner/name" (`bounds.check_repository`), or this command's error."""
        try:
            return bounds.check_repository(value, field)
        except InvalidInput as exc:
            raise self.relay(exc) from None

    def genesis(self, value: str, field: str) -> str:
        """`value` as a genesis kind, in lower case, or this command's error."""
        if value.lower() not in {g.value for g in Genesis}:
            raise self.fail("not_a_genesis", field=field, value=shown(value), allowed=[g.value for g in Genesis])
        return value.lower()

    def peek(self) -> str | None:
        return self.tokens[self.position].text if self.position < len(self.tokens) else None

    def take(self, what: str) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("missing", what=what)
        self.position += 1
        return token

    def rest(self) -> str:
        """The raw text from the current word on, whitespace inside it preserved."""
        if self.position >= len(self.tokens):
            return ""
        return self.source[self.tokens[self.position].start :].strip()

    def end(self) -> None:
        token = self.peek()
        if token is not None:
            raise self.fail("unexpected", token=shown(token))

    def session_id(self, field: str = "id") -> int:
        return self.ident(self.take(f"<{field}>" if field != "id" else "session <id>"), field)

    def ident(self, token: str, field: str = "id") -> int:
        match = ID_PATTERN.fullmatch(token)
        if match is None:
            raise self.fail("not_an_id", field=field, token=shown(token))
        value = int(match.group(1))
        if not 1 <= value <= bounds.MAX_ID:
            raise self.fail("id_out_of_range", field=field, token=shown(token), most=bounds.MAX_ID)
        return value

    def integer(self, token: str, field: str, low: int, high: int) -> int:
        if INT_PATTERN.fullmatch(token) is None:
            raise self.fail("not_whole", field=field, token=shown(token))
        value = int(token)
        if not low <= value <= high:
            raise self.fail("out_of_bounds", field=field, token=shown(token), low=low, high=high)
        return value

    def lift(self, fn: Callable[[], T]) -> T:
        """Run a times/genesis check and re-raise its InvalidInput with this usage line."""
        try:
            return fn()
        except InvalidInput as exc:
            raise self.relay(exc) from None
