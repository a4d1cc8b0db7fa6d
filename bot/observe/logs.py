"""One log pipeline for Pacer, uvicorn and the libraries: one handler on stderr, one format.

`PACER_LOG_FORMAT=text` (the default) prints `time LEVEL logger: message`; `json` prints one JSON
object a line with `time`, `level`, `logger` and `message` (and `exception` when there is one),
for a log shipper. The same dictConfig is applied at start-up and handed to uvicorn as its
`log_config`, so uvicorn's lines come out of the same handler in the same format.

APScheduler narrates every job it adds, runs and removes, and the HTTP clients every request;
in a busy minute that buried Pacer's own lines, so they log at WARNING unless the level is DEBUG.

Every line says which request and which session it belongs to, when it belongs to one: `Ids`,
a filter on the one handler, reads `REQUEST_ID` (set by `bot.observe.request_ids` around each HTTP
request) and `scheduler.log_context.SESSION_ID` (set where a decision for one session runs). A
line that names its session itself (`extra={"session_id": ...}`) keeps its own; any other line
that says `session #N` is about session N. Text shows them
after the logger (`pacer.github [request=3f2a9c0d1e2b4a5f session=12]: ...`), JSON as the
`request_id` and `session_id` fields. A line that knows its notice's `event`, `reason`, `class` or
`genesis` passes them as `extra=`, and JSON shows them as fields of their own too (FIELDS).
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.log_context import SESSION_ID

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s"
CHATTY = ("apscheduler", "httpx", "httpcore", "urllib3", "slack_sdk", "alembic")
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
# What a JSON line carries beside its message, when the record has it: the ids (the Ids filter's),
# and what a log call knows and passes as `extra=` (a notice's event and reason, its session's
# genesis and class: bot.runtime.notify), so a shipper filters on a field rather than the words.
FIELDS = ("request_id", "session_id", "event", "reason", "class", "genesis")


NAMED_SESSION = re.compile(r"\bsession #(\d+)")
QUERY_TOKEN = re.compile(r"([?&]token=)[^&#\s]*", re.IGNORECASE)
REQUEST_ID: ContextVar[str | None] = ContextVar("pacer_request_id", default=None)


class Ids(logging.Filter):
    """Stamps `request_id`, `session_id` and the text form `ids` on every record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        session_id = getattr(record, "session_id", None)
        if session_id is None:
            session_id = SESSION_ID.get()
        if session_id is None:  # a line outside any decision that still names its session
            found = NAMED_SESSION.search(record.getMessage())
            session_id = int(found.group(1)) if found else None
        record.request_id, record.session_id = request_id, session_id
        named = [f"request={request_id}"] if request_id else []
        if session_id is not None:
            named.append(f"session={session_id}")
        record.ids = f" [{' '.join(named)}]" if named else ""
        return True


class HideTokens(logging.Filter):
    """The live page is opened with `/?token=<token>`, and uvicorn's access line names the path
    with its query: the token's value is written as *** before any handler sees the line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(QUERY_TOKEN.sub(r"\1***", arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line; a traceback goes into `exception` so the line stays one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def config(level: str = "INFO", fmt: str = "text", file: str | None = None) -> dict[str, Any]:
    """The dictConfig for `level` and `fmt` (unknown values fall back to INFO and text: settings
    reject them with their own one-line error once they are read), on stderr or, given `file`,
    appended to that file (made, with its folder, at the first line)."""
    level = level.upper() if level.upper() in LEVELS else "INFO"
    formatter: dict[str, Any] = {"()": JsonFormatter} if fmt == "json" else {"format": TEXT_FORMAT}
    chatty_level = "DEBUG" if level == "DEBUG" else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"pacer": formatter},
        "filters": {"ids": {"()": Ids}, "hide_tokens": {"()": HideTokens}},
        "handlers": {"pacer": _handler(file)},
        "root": {"level": level, "handlers": ["pacer"]},
        "loggers": {
            **{name: {"level": chatty_level} for name in CHATTY},
            # No handlers of their own: uvicorn's lines propagate to the one root handler.
            **{name: {"level": level, "handlers": [], "propagate": True} for name in UVICORN},
            "uvicorn.access": {"level": level, "handlers": [], "propagate": True, "filters": ["hide_tokens"]},
        },
    }


def _handler(file: str | None) -> dict[str, Any]:
    if file is None:
        return {"class": "logging.StreamHandler", "formatter": "pacer", "filters": ["ids"], "stream": "ext://sys.stderr"}
    Path(file).parent.mkdir(parents=True, exist_ok=True)
    return {"class": "logging.FileHandler", "formatter": "pacer", "filters": ["ids"], "filename": file,
            "delay": True, "encoding": "utf-8"}


def configure(level: str = "INFO", fmt: str = "text", *, file: str | None = None) -> None:
    logging.config.dictConfig(config(level, fmt, file))


def first_line(exc: BaseException) -> str:
    """The first line of a driver's error (psycopg and sqlite3 put what failed there), for a log
    line or a message in place of its traceback; SQLAlchemy's wrapper is looked through."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
