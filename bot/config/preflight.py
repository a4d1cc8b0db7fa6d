"""What `pacer` settles before the settings are validated, so that every line it logs, the first
included, is in the format configured: the log level and format (the environment over
pacer.toml's [settings], unvalidated: `load` rejects a bad value with its own line), and the
`PACER_*` variables that are no setting. Left alone, a typo such as `PACER_PORTT=9000` was
ignored without a word and the port stayed 8080; `pacer` now warns, naming the setting it most
likely meant (difflib's nearest match)."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

PREFIX = "PACER_"
# PACER_* names that are not settings and are read or set on purpose: the path of pacer.toml, what
# an agent's environment carries, and the test suite's and benchmarks' own switches.
NOT_SETTINGS = frozenset({
    "PACER_CONFIG", "PACER_SESSION_ID", "PACER_TURN_ID", "PACER_SUPERVISOR",
    "PACER_TEST_DATABASE_URL", "PACER_BENCH_DATABASE_URL", "PACER_REQUIRE_POSTGRES", "PACER_REQUIRE_CHROMIUM",
    "PACER_REQUIRE_CUSTODY", "PACER_REQUIRE_PROMTOOL", "PACER_FUZZ_EXAMPLES", "PACER_FUZZ_EXPLORE",
    "PACER_SCHEMA_EXAMPLES", "PACER_LIVE_SCREENSHOT", "PACER_PG_STOP", "PACER_TEST_WORKERS", "PACER_TEST_CPU_LOG",
})


class Stray(NamedTuple):
    name: str
    nearest: str | None  # the setting it most likely meant, if one is close enough


def strays(environ: Mapping[str, str], settings: Iterable[str]) -> list[Stray]:
    """Every PACER_* variable in `environ` that names neither a setting nor a known non-setting."""
    known = [name for name in settings if name.startswith(PREFIX)]
    found = sorted(name for name in environ if name.startswith(PREFIX) and name not in NOT_SETTINGS)
    return [
        Stray(name, next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.75)), None))
        for name in found
        if name not in known
    ]


def log_options(environ: Mapping[str, str], toml_path: str | None) -> tuple[str, str]:
    """PACER_LOG_LEVEL and PACER_LOG_FORMAT as they will be in force: the environment over
    pacer.toml's [settings] over INFO and text. A file that cannot be read counts as absent here:
    `load` stops start-up on it with its own line, which is then already in this format."""
    try:
        data = tomllib.loads(Path(toml_path or environ.get("PACER_CONFIG", "pacer.toml")).read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        data = {}
    table = data.get("settings")
    from_file = {str(k).upper(): str(v) for k, v in table.items()} if isinstance(table, dict) else {}

    def value(name: str, default: str) -> str:
        return environ.get(name) or from_file.get(name) or default

    return value("PACER_LOG_LEVEL", "INFO"), value("PACER_LOG_FORMAT", "text")
