"""What a running agent is doing, read from one line of its stream at a time. Pure: the progress
so far and a line in, the progress after it out, so one table tests every shape
(tests/integrations/test_progress.py).

    now = next_progress(before, line, root="/work/session-3")   # `before` itself when the line says nothing new

Claude Code, `--output-format stream-json --verbose`, prints each assistant message whole, as it
ends, one JSON line each; a message that calls tools carries content blocks of type "tool_use":

    {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_01…",
     "name": "Bash", "input": {"command": "pytest -q", "description": "Run the tests"}}], …}, …}

Its todo list is the input of the TodoWrite tool, the whole list each time:

    {"type": "tool_use", "name": "TodoWrite", "input": {"todos": [{"content": "Run the tests",
     "status": "in_progress", "activeForm": "Running the tests"}, …]}}

and its last line is the result, with the turn's cost and duration (`total_cost_usd`,
`duration_ms`). Shapes as Claude Code prints them, seen in anthropics/claude-code-action's
stream parsing and in the stream fixtures of hrntknr/claude-code-protocol (docs/05_tool_todo.md);
TodoWrite's `activeForm` from the tool's own schema. Claude Code states no cost before its result,
so the cost so far is known only from a line that states one (`total_cost_usd`); the surfaces add
the session's earlier turns.

What is shown is chosen to be safe to show on an issue: a tool's name, and only the input
fields that say where it works (a file's path, made relative to the turn's directory; a search
pattern; a URL without its query or credentials; the description a Bash call or a subagent
carries) — never a command line, which may hold a secret. Every text is cut to a line of
`DETAIL_CHARS`, a list to `MAX_TODOS`. A malformed line, another event or a field of the wrong
type changes nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scheduler.ports import TodoItem, TurnProgress

MARKERS = (b'"tool_use"', b'"total_cost_usd"')  # a line without either is not parsed at all
TODO_TOOL = "TodoWrite"
TODO_STATUSES = frozenset({"pending", "in_progress", "completed"})
DETAIL_CHARS = 120
TOOL_CHARS = 60
MAX_TODOS = 30
# The input field each tool is shown with; a tool not here is shown by its name alone.
DETAIL_FIELDS = {
    "Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path", "Grep": "pattern", "Glob": "pattern", "WebFetch": "url",
    "WebSearch": "query", "Bash": "description", "Task": "description", "Agent": "description",
}
PATH_FIELDS = frozenset({"file_path", "notebook_path"})


def is_candidate(line: bytes) -> bool:
    """Whether a raw line may change the progress: a substring test, so the agent's other lines
    cost no JSON parse."""
    return any(marker in line for marker in MARKERS)


def _line_of(value: Any, limit: int = DETAIL_CHARS) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def _shown_url(url: str) -> str:
    """A URL without its query, its fragment or the credentials before its host: each may carry a key."""
    bare = url.split("?", 1)[0].split("#", 1)[0]
    try:
        parts = urlsplit(bare)
    except ValueError:  # not a URL that parses: shown from after its last "@"
        return bare.rpartition("@")[2]
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _todos(value: Any) -> tuple[TodoItem, ...] | None:
    if not isinstance(value, list):
        return None
    items = []
    for entry in value[:MAX_TODOS]:
        if not isinstance(entry, dict):
            continue
        content, status = _line_of(entry.get("content")), entry.get("status")
        if content is None or status not in TODO_STATUSES:
            continue
        items.append(TodoItem(content, status, _line_of(entry.get("activeForm"))))
    return tuple(items)


def _tool_call(progress: TurnProgress, block: dict[str, Any], root: str | None) -> TurnProgress:
    name = _line_of(block.get("name"), TOOL_CHARS)
    if name is None:
        return progress
    given = block.get("input")
    given = given if isinstance(given, dict) else {}
    todos = _todos(given.get("todos")) if name == TODO_TOOL else None
    key = DETAIL_FIELDS.get(name)
    detail = _line_of(given.get(key)) if key is not None else None
    if detail is not None and key in PATH_FIELDS:
        detail = _line_of(_where(str(given.get(key)), root))
    elif detail is not None and key == "url":
        detail = _line_of(_shown_url(detail))
    return replace(
        progress, tool=name, detail=detail, tools_used=progress.tools_used + 1,
        todos=todos if todos is not None else progress.todos,
    )


def _cost(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def next_progress(progress: TurnProgress, line: str | bytes, *, root: str | None = None) -> TurnProgress:
    """The progress after one line of the agent's stream; `progress` itself when the line says
    nothing new. `root`: the turn's directory, which file paths are shown relative to."""
    raw = line if isinstance(line, bytes) else line.encode("utf-8", errors="replace")
    if not is_candidate(raw):
        return progress
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth: raised, not a ValueError
        return progress
    if not isinstance(obj, dict):
        return progress
    after = progress
    cost = _cost(obj.get("total_cost_usd"))
    if cost is not None:
        after = replace(after, cost_usd=cost)
    message = obj.get("message") if obj.get("type") == "assistant" else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            after = _tool_call(after, block, root)
    return after


def as_plain(progress: TurnProgress) -> dict[str, Any]:
    """Progress as JSON-ready values, for the turn's row."""
    todos = None if progress.todos is None else [
        {"content": t.content, "status": t.status, "active_form": t.active_form} for t in progress.todos
    ]
    return {
        "tool": progress.tool, "detail": progress.detail, "todos": todos,
        "cost_usd": progress.cost_usd, "tools_used": progress.tools_used,
    }


__all__ = ["DETAIL_CHARS", "MAX_TODOS", "TODO_TOOL", "as_plain", "is_candidate", "next_progress"]
