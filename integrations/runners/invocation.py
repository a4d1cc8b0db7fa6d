"""How one turn's agent is invoked: the command template split into argv words once, at
start-up, and each turn's placeholders and prompt put in them. Pure.

Never a shell. The template is split with `shlex.split` once, at start-up, and the placeholders
are substituted inside each argument afterwards, in one pass, so a prompt is always exactly one
argv element whatever it holds (quotes, `;`, `$(...)`, newlines) and a prompt that contains
`{turn_id}` is not substituted again; a prompt beginning with "-" gets a leading space where it
begins an argument, so it cannot be read as an option. Placeholders: {prompt} {prompt_file}
{agent_session_id} {session_id} {turn_id} {workdir}. The prompt reaches the agent one of three
ways: a template without {prompt} or {prompt_file} gives it on stdin; {prompt_file} is the path of
a file holding it (an in-memory file the agent inherits, `/dev/fd/3`: nothing on disk, nothing
another session can read); {prompt} puts it on the command line, where Linux takes at most
`ARGUMENT_BYTES` an argument, so a longer prompt goes on stdin instead when {prompt} is a word
of its own (Claude Code's `-p` and Codex's `exec` both read stdin when no prompt argument is
given) and fails the turn, saying why, when {prompt} is part of a longer word. The resume
arguments are appended only on a turn that carries an agent session id. A template that runs
its agent with streamed input (`--input-format stream-json`) gives it the prompt as the first
JSON line on stdin, and people's messages after it while it works (`listening.py`).

An agent that can stop itself at a budget is given the session's cost cap left
(`TurnRequest.max_budget_usd`): Claude Code (`claude`, the program the template runs) takes
`--max-budget-usd`, appended when the session has a cap and the template does not set one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import integrations.runners.outcomes as outcomes
from integrations.runners.leash import GIVEN_FD
from scheduler.errors import ConfigError, InvalidInput
from scheduler.ports import TurnRequest
from templates import error_text

PLACEHOLDERS = ("prompt", "prompt_file", "agent_session_id", "session_id", "turn_id", "workdir")
# The longest argument Linux takes: 32 pages (MAX_ARG_STRLEN), its terminating NUL included.
ARGUMENT_BYTES = 131_071
PROMPT_FD = GIVEN_FD  # the descriptor {prompt_file} names in the agent
BUDGET_OPTION = "--max-budget-usd"  # Claude Code's: it stops itself once a turn has cost this much
BUDGET_REACHED = "error_max_budget_usd"  # the subtype of the result it then reports
INPUT_FORMAT, STREAMED = "--input-format", "stream-json"  # Claude Code's streamed input: JSON lines on stdin

_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split_template(template: str, setting: str) -> list[str]:
    """`template` as argv words, checked; a bad one raises ConfigError naming `setting`."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ConfigError(error_text("runners/unsplittable", setting=setting, template=template, problem=exc)) from None
    unknown = sorted({m.group(1) for w in words for m in _ANY_NAME.finditer(w)} - set(PLACEHOLDERS))
    if unknown:
        allowed = ["{" + p + "}" for p in PLACEHOLDERS]
        raise ConfigError(
            error_text(
                "runners/unknown_placeholder", setting=setting, template=template, name=unknown[0], allowed=allowed
            )
        )
    return words


@dataclass(frozen=True)
class Invocation:
    """How one turn's agent is started: its argv, what goes on its stdin, whether it gets the
    prompt as the file {prompt_file} names, and whether it takes streamed input (the prompt is
    then its first stdin line, and people's messages follow: `listening.py`)."""

    argv: list[str]
    stdin: str | None
    prompt_file: bool = False
    streamed: bool = False


def takes_streamed_input(words: list[str]) -> bool:
    """Whether the template runs its agent with streamed input: `--input-format stream-json`."""
    pairs = zip(words, words[1:], strict=False)
    return f"{INPUT_FORMAT}={STREAMED}" in words or any(a == INPUT_FORMAT and b == STREAMED for a, b in pairs)


def budget_option(words: list[str]) -> str | None:
    """The option that tells the agent the template runs its budget, or None when it takes none
    or the template sets its own."""
    if not words or Path(words[0]).name != "claude" or any(w.startswith(BUDGET_OPTION) for w in words):
        return None
    return BUDGET_OPTION


def build_argv(
    words: list[str], resume_words: list[str], request: TurnRequest, workdir: Path, *, budget: str | None = None
) -> Invocation:
    """The invocation of one turn's agent. Pure.

    Raises InvalidInput when the request's agent session id is not a plain identifier (it would
    be passed as an argument), and when the prompt is too long for the argument it is part of.
    """
    resume = request.agent_session_id
    if resume is not None and not outcomes.AGENT_SESSION_ID.match(resume):
        raise InvalidInput(error_text("runners/agent_session_id", value=resume[:40]), field="agent_session_id")
    chosen = words + (resume_words if resume else [])
    streamed = takes_streamed_input(chosen)
    if streamed:  # the prompt is the first line on stdin; an argument holding it would be a second prompt
        chosen = [word for word in chosen if word != "{prompt}"]
    prompt_bytes = len(request.prompt.encode("utf-8", errors="surrogatepass"))
    on_stdin = not any("{prompt}" in word or "{prompt_file}" in word for word in chosen)
    if prompt_bytes + 1 > ARGUMENT_BYTES and any("{prompt}" in word for word in chosen):  # + 1: the space before a "-"
        if any("{prompt}" in word and word != "{prompt}" for word in chosen):
            raise InvalidInput(
                error_text("runners/prompt_too_long", size=prompt_bytes, limit=ARGUMENT_BYTES - 1), field="prompt"
            )
        chosen, on_stdin = [word for word in chosen if word != "{prompt}"], True
    values = {
        "prompt": request.prompt,
        "prompt_file": f"/dev/fd/{PROMPT_FD}",
        "agent_session_id": resume or "",
        "session_id": str(request.session_id),
        "turn_id": str(request.turn_id),
        "workdir": str(workdir),
    }
    argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], word) for word in chosen]
    if budget is not None and request.max_budget_usd is not None:
        # A cent at least: a cap all but spent is held before its turn starts, and "0.00" is no budget.
        argv += [budget, f"{max(request.max_budget_usd, 0.01):.2f}"]
    if request.prompt.startswith("-"):
        # Claude Code takes the prompt as a positional argument: a prompt reading
        # "--dangerously-skip-permissions" would be parsed as that option. A leading space
        # keeps it a prompt and changes nothing an agent reads.
        argv = [" " + arg if word.startswith("{prompt}") and not word.startswith("{prompt_file}") else arg
                for word, arg in zip(chosen, argv, strict=True)]
    return Invocation(argv, request.prompt if on_stdin or streamed else None,
                      any("{prompt_file}" in word for word in chosen), streamed)
