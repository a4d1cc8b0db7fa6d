"""One log pipeline for Pacer, uvicorn and the libraries: one handler on stderr, one format.

`PACER_LOG_FORMAT=text` (the default) prints `time LEVEL logger: message`; `json` prints one JSON
object a line with `time`, `level`, `logger` and `message` (and `exception` when there is one),
for a log shipper. The same dictConfig is applied at start-up and handed to uvicorn as its
`log_config`, so uvicorn's lines come out of the same handler in the same format.

APScheduler narrates every job it adds, runs and removes, and the HTTP clients every request;
in a busy minute that buried Pacer's own lines, so they log at WARNING unless the level is DEBUG.
"""

from __future__ import annotations

import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CHATTY = ("apscheduler", "httpx", "httpcore", "urllib3", "slack_sdk", "alembic")
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


class JsonFormatter(logging.Formatter):
    """One JSON object a line; a traceback goes into `exception` so the line stays one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def config(level: str = "INFO", fmt: str = "text") -> dict[str, Any]:
    """The dictConfig for `level` and `fmt` (unknown values fall back to INFO and text: settings
    reject them with their own one-line error once they are read)."""
    level = level.upper() if level.upper() in LEVELS else "INFO"
    formatter: dict[str, Any] = {"()": JsonFormatter} if fmt == "json" else {"format": TEXT_FORMAT}
    chatty_level = "DEBUG" if level == "DEBUG" else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"pacer": formatter},
        "handlers": {"pacer": {"class": "logging.StreamHandler", "formatter": "pacer", "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["pacer"]},
        "loggers": {
            **{name: {"level": chatty_level} for name in CHATTY},
            # No handlers of their own: uvicorn's lines propagate to the one root handler.
            **{name: {"level": level, "handlers": [], "propagate": True} for name in UVICORN},
        },
    }


def configure(level: str = "INFO", fmt: str = "text") -> None:
    logging.config.dictConfig(config(level, fmt))
