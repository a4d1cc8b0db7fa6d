"""What a running agent is doing, read from its stream (P19, "Live progress"): the tool in use, its
todo list as a checklist, its cost when the stream states one. One table of lines as Claude Code
prints them (`--output-format stream-json --verbose`), and the real command runner telling
`on_progress` as an agent prints them."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from integrations.runners.command import CommandRunner
from integrations.runners.echo import EchoRunner
from integrations.runners.progress import MAX_TODOS, as_plain, next_progress
from scheduler.ports import Outcome, TodoItem, TurnProgress, TurnRequest

ROOT = "/var/pacer/work/session-3"
# Lines as Claude Code prints them: an init line, an assistant message calling tools, the tool
# results (a user message), TodoWrite's whole list, the result with the turn's cost.
INIT = ('{"type":"system","subtype":"init","cwd":"/var/pacer/work/session-3","session_id":"9d9f07e1-2696",'
        '"tools":["Bash","Read","TodoWrite"],"model":"claude-sonnet-4-5-20250929","permissionMode":"default"}')
READ = ('{"type":"assistant","message":{"id":"msg_01","type":"message","role":"assistant",'
        '"model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Looking at the parser."},'
        '{"type":"tool_use","id":"toolu_01A","name":"Read","input":{"file_path":"/var/pacer/work/session-3/src/parse.py"}}],'
        '"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":4}},"parent_tool_use_id":null,'
        '"session_id":"9d9f07e1-2696"}')
BASH = ('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_01B","name":"Bash",'
        '"input":{"command":"GITHUB_TOKEN=ghp_x curl -s https://api.github.com","description":"Run the tests"}}]},'
        '"session_id":"9d9f07e1-2696"}')
TODO = ('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_01C","name":"TodoWrite",'
        '"input":{"todos":[{"content":"Read the parser","status":"completed","activeForm":"Reading the parser"},'
        '{"content":"Fix the off-by-one","status":"in_progress","activeForm":"Fixing the off-by-one"},'
        '{"content":"Run the tests","status":"pending","activeForm":"Running the tests"}]}}]},'
        '"session_id":"9d9f07e1-2696"}')
TOOL_RESULT = ('{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01C","type":"tool_result",'
               '"content":"Todos have been modified successfully."}]},"session_id":"9d9f07e1-2696"}')
RESULT = ('{"type":"result","subtype":"success","is_error":false,"duration_ms":61000,"num_turns":4,'
          '"result":"Fixed.","session_id":"9d9f07e1-2696","total_cost_usd":0.4213,"usage":{}}')
CHECKLIST = (
    TodoItem("Read the parser", "completed", "Reading the parser"),
    TodoItem("Fix the off-by-one", "in_progress", "Fixing the off-by-one"),
    TodoItem("Run the tests", "pending", "Running the tests"),
)


def _through(*lines: str) -> TurnProgress:
    progress = TurnProgress()
    for line in lines:
        progress = next_progress(progress, line, root=ROOT)
    return progress


def test_a_claude_code_stream_gives_the_tool_the_checklist_and_the_cost() -> None:
    assert _through(INIT) == TurnProgress()
    assert _through(INIT, READ) == TurnProgress(tool="Read", detail="src/parse.py", tools_used=1)
    after_todo = _through(INIT, READ, TODO, TOOL_RESULT)
    assert after_todo == TurnProgress(tool="TodoWrite", todos=CHECKLIST, tools_used=2)
    # The checklist stays while other tools run; a Bash call is shown by its description, never
    # its command line, which may hold a secret.
    after_bash = _through(INIT, READ, TODO, TOOL_RESULT, BASH)
    assert (after_bash.tool, after_bash.detail, after_bash.todos, after_bash.tools_used) == (
        "Bash", "Run the tests", CHECKLIST, 3)
    assert "ghp_x" not in json.dumps(as_plain(after_bash))
    assert _through(INIT, READ, TODO, BASH, RESULT).cost_usd == pytest.approx(0.4213)


def test_a_fetched_url_is_shown_without_its_query() -> None:
    line = json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "WebFetch", "input": {
        "url": "https://api.example.com/v1/items?api_key=sk-secret#top", "prompt": "list them"}}]}})
    assert _through(line).detail == "https://api.example.com/v1/items"


def test_a_fetched_url_is_shown_without_the_credentials_in_it() -> None:
    line = json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "WebFetch", "input": {
        "url": "https://x-access-token:ghs_secret@github.com/acme/api.git?x=1", "prompt": "read"}}]}})
    assert _through(line).detail == "https://github.com/acme/api.git"


@pytest.mark.parametrize(
    "line",
    [
        "",
        "not json",
        '["tool_use"]',
        '{"type":"assistant","message":{"content":"tool_use"}}',
        '{"type":"assistant","message":{"content":[{"type":"tool_use","name":42,"input":{}}]}}',
        '{"type":"user","message":{"content":[{"type":"tool_use","name":"Bash","input":{}}]}}',
        '{"type":"result","total_cost_usd":-1}',
        '{"type":"result","total_cost_usd":"0.5"}',
        '{"type":"result","total_cost_usd":true}',
        '{"type":"assistant","message":{"content":[{"type":"text","text":"no tools"}]}}',
        '{"type":"tool_use","input":' + "[" * 5000 + "]" * 5000 + "}",  # nested past the parser's depth
    ],
)
def test_a_line_that_says_nothing_of_progress_changes_nothing(line: str) -> None:
    before = TurnProgress(tool="Edit", detail="a.py", todos=CHECKLIST, cost_usd=0.1, tools_used=4)
    assert next_progress(before, line, root=ROOT) is before


def test_a_todo_list_of_the_wrong_shape_keeps_what_it_can() -> None:
    line = json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "TodoWrite", "input": {
        "todos": [{"content": "ok", "status": "pending"}, {"content": "bad", "status": "done"}, "x",
                  {"content": "", "status": "pending"}, {"content": "line\nbreak " + "y" * 300, "status": "completed"}]
        + [{"content": f"more {i}", "status": "pending"} for i in range(40)]}}]}})
    todos = _through(line).todos
    assert todos is not None and todos[0] == TodoItem("ok", "pending", None)
    assert todos[1].content.startswith("line break y") and len(todos[1].content) == 120 and todos[1].content[-1] == "…"
    assert len(todos) == MAX_TODOS - 3  # the first MAX_TODOS entries, less the three malformed
    assert _through(line, '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TodoWrite",'
                          '"input":{"todos":[]}}]}}').todos == ()


AGENT = """
import json, sys, time
def say(obj):
    print(json.dumps(obj), flush=True)
say({"type": "system", "subtype": "init", "session_id": "live-1"})
say({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "TodoWrite", "input": {"todos": [
    {"content": "Look", "status": "in_progress", "activeForm": "Looking"}]}}]}})
print("x" * 70000, flush=True)  # a line past LINE_BYTES: skipped whole
print('{"type":"tool_use","input":' + "[" * 5000 + "]" * 5000 + "}", flush=True)  # too deep to parse: skipped
say({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Edit",
    "input": {"file_path": sys.argv[1] + "/notes.md"}}]}})
say({"type": "assistant", "message": {"content": [{"type": "text", "text": "done"}]}})
say({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.05, "duration_ms": 900})
"""


def test_the_command_runner_tells_on_progress_as_the_agent_prints(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    runner = CommandRunner(f"{sys.executable} {script} {{workdir}}", "", "live", 30, tmp_path / "work",
                           env={"PATH": "/usr/bin:/bin"})
    told: list[TurnProgress] = []
    result = runner.run(TurnRequest(session_id=3, turn_id=1, prompt="go", on_progress=told.append))
    assert result.outcome is Outcome.SUCCESS, result.error
    looking = (TodoItem("Look", "in_progress", "Looking"),)
    assert told == [
        TurnProgress(tool="TodoWrite", todos=looking, tools_used=1),
        TurnProgress(tool="Edit", detail="notes.md", todos=looking, tools_used=2),
        TurnProgress(tool="Edit", detail="notes.md", todos=looking, cost_usd=0.05, tools_used=2),
    ]


def test_a_failing_on_progress_never_stops_the_turn(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    runner = CommandRunner(f"{sys.executable} {script} {{workdir}}", "", "live", 30, tmp_path / "work",
                           env={"PATH": "/usr/bin:/bin"})

    def broken(progress: TurnProgress) -> None:
        raise RuntimeError("the store is down")

    result = runner.run(TurnRequest(session_id=3, turn_id=2, prompt="go", on_progress=broken))
    assert result.outcome is Outcome.SUCCESS and result.output == "ok"


def test_the_echo_agent_keeps_a_small_todo_list_so_the_demo_shows_progress() -> None:
    told: list[TurnProgress] = []
    result = EchoRunner(0.03, 0.01).run(TurnRequest(session_id=1, turn_id=1, prompt="hi", on_progress=told.append))
    assert result.outcome is Outcome.SUCCESS
    assert [p.todos and [t.status for t in p.todos] for p in told] == [
        ["in_progress", "pending", "pending"], ["completed", "in_progress", "pending"],
        ["completed", "completed", "in_progress"],
    ]
    assert told[1].todos is not None and told[1].todos[1].active_form == "Thinking it over"


DEEP = "[" * 5000 + "]" * 5000  # nested past json's depth: json.loads raises RecursionError, not ValueError
DEEP_AGENT = """
import json
DEEP = "[" * 5000 + "]" * 5000
print('{"type":"system","subtype":"init","x":' + DEEP + '}', flush=True)  # read for the session id
print(json.dumps({"type": "system", "subtype": "init", "session_id": "deep-1"}), flush=True)
print('{"type":"rate_limit_event","x":' + DEEP + '}', flush=True)  # read for a quota reading
print(json.dumps({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.05}), flush=True)
print('{"type":"result","x":' + DEEP + '}', flush=True)  # read for the report, from the end
"""


def test_lines_nested_too_deep_to_parse_change_nothing_in_the_turn(tmp_path: Path) -> None:
    """Every reader of the stream takes a line nested past the parser's depth as one that says
    nothing: the pipe is still drained, the result still read."""
    from integrations.runners.listening import Answered

    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(DEEP_AGENT))
    runner = CommandRunner(f"{sys.executable} {script} {{workdir}}", "", "live", 30, tmp_path / "work",
                           env={"PATH": "/usr/bin:/bin"})
    result = runner.run(TurnRequest(session_id=3, turn_id=1, prompt="go", on_progress=lambda _p: None))
    assert result.outcome is Outcome.SUCCESS and result.output == "ok", result.error
    assert result.agent_session_id == "deep-1" and result.cost_usd == 0.05
    answered = Answered(None)
    answered.hear(('{"type":"result","x":' + DEEP + "}").encode())  # the first result line: not this
    assert not answered.event.is_set()
