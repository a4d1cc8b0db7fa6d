"""Adding settings to pacer.toml's [settings] table without a TOML writer: the lines go right
under the table's header (or a new table at the end), the rest of the file stays as it was, and
the result is read back before it replaces the file."""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path

from scheduler.errors import ConfigError
from templates import error_text

HEADER = re.compile(r"^[ \t]*\[[ \t]*settings[ \t]*\][ \t]*(#.*)?$", re.M)


def read(path: Path) -> dict[str, object]:
    """The file as TOML ({} when there is none); a ConfigError naming it when it is not TOML."""
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(error_text("settings/not_toml", path=path, detail=exc)) from None


def already_set(path: Path, names: list[str]) -> list[str]:
    """Which of `names` the file's [settings] sets already."""
    table = read(path).get("settings", {})
    present = {str(k).upper() for k in table} if isinstance(table, dict) else set()
    return [name for name in names if name in present]


def add_settings(path: Path, values: Mapping[str, str]) -> None:
    """Write `values` into [settings] of the file at `path` (made when missing), mode 0600: it
    then holds a secret. A ConfigError, and the file unchanged, when they cannot be added."""
    text = path.read_text() if path.exists() else ""
    lines = "".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items())
    header = HEADER.search(text)
    if header is not None:
        at = header.end() + 1 if header.end() < len(text) else len(text)
        new = text[:at] + ("" if text[:at].endswith("\n") else "\n") + lines + text[at:]
    elif "settings" in read(path):  # set some other way (dotted keys, an inline table): not ours to rewrite
        raise ConfigError(error_text("settings/toml_not_added", path=path, names=list(values)))
    else:
        before = (text if text.endswith("\n") else text + "\n") + "\n" if text else ""
        new = before + "[settings]\n" + lines
    try:
        read_back = tomllib.loads(new).get("settings", {})
    except tomllib.TOMLDecodeError:
        read_back = {}
    if any(read_back.get(name) != value for name, value in values.items()):
        raise ConfigError(error_text("settings/toml_not_added", path=path, names=list(values)))
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:  # mkstemp makes it 0600
            out.write(new)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
