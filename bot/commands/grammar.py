"""The `/pacer` grammar: a pure parser from text to a `Command`, or a `CommandError` carrying
one line that names the argument and what is allowed, plus the subcommand's usage line.

Nothing else escapes `parse`, whatever the text: the Slack handler, the console and the API
all hand it raw input, and a fuzz test holds it to that.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import bot.commands.command as c
import bot.commands.session_words as words
from bot.commands.cursor import ID_PATTERN, INT_PATTERN, Cursor, Token, shown
from bot.commands.policy_words import POLICY_USAGE, class_choice, parse_policy
from bot.commands.times import TimeSpec, parse_duration, parse_time
from scheduler import bounds
from scheduler.errors import CommandError
from templates import error_text

MAX_CHARS = 4000

USAGE: dict[str, str] = {
    "help": "help [command]",
    "queue": "queue [spot|priority|all] [genesis:<genesis>]",
    "holds": "holds",
    "burn": "burn",
    "why": "why <id>",
    "promote": "promote <id>",
    "demote": "demote <id> [top]",
    "rank": "rank <id> <n>|top|above <id>|below <id>|between <id> <id>",
    "start": "start <id>",
    "restart": "restart <id>",
    "weight": "weight <id> <w>",
    "capacity": "capacity <id> <n>|<m>x|fleet",
    "cap": "cap <id> <usd>|none",
    "pause": "pause <id> [until <time>|queue [halt]] [with <prompt…>]",
    "archive": "archive <id>",
    "stop": "stop <id>",
    "hold": "hold <#id[,#id…]|genesis:<g>|trigger:<id>|repo:<owner/name>|label:<name>|class:<priority|spot>|all>"
    " [for <duration>] [reason…]",
    "release": "release <hold id>",
    "resume": "resume [<group>]",
    "policy": POLICY_USAGE,
    "trigger": "trigger <id>  |  trigger <id> class priority|spot|default  |  trigger <id> precedence <n>",
    "new": "new [--spot] [--cap <usd>] [--rank <n>|top] [repo:<owner/name>] [weight:<w>] [capacity:<n>|<m>x]"
    " [cap:<usd>] [rank:<n>|top] <prompt>",
    "whatif": "whatif <id>|--spot",
    "summary": "summary <id>",
    "reply": "reply <id> <text>",
}
NAMES = tuple(USAGE)
# What people type for a command by another name: a suggestion close in meaning, never a guess
# from the spelling alone (`clear` once suggested `restart`, which re-runs a session).
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(("list", "ls", "status", "stat", "show", "jobs", "sessions"), "queue"),
    **dict.fromkeys(("explain", "reason", "waiting"), "why"),
    **dict.fromkeys(("create", "add", "submit", "ask"), "new"),
    **dict.fromkeys(("run", "go", "kick"), "start"),
    **dict.fromkeys(("retry", "rerun", "redo"), "restart"),
    **dict.fromkeys(("halt", "suspend", "sleep", "park"), "pause"),
    **dict.fromkeys(("cancel", "delete", "remove", "rm", "kill", "close", "drop"), "archive"),
    **dict.fromkeys(("unhold", "unblock", "free"), "release"),
    **dict.fromkeys(("unpause", "continue"), "resume"),
    **dict.fromkeys(("bump", "boost", "up", "urgent"), "promote"),
    **dict.fromkeys(("down", "lower"), "demote"),
    **dict.fromkeys(("order", "reorder", "move", "priority", "precedence"), "rank"),
    **dict.fromkeys(("block", "freeze"), "hold"),
    **dict.fromkeys(("config", "settings", "limits"), "policy"),
    **dict.fromkeys(("answer", "respond", "say", "message"), "reply"),
    **dict.fromkeys(("simulate", "predict", "would"), "whatif"),
    **dict.fromkeys(("man", "usage", "commands", "?"), "help"),
}
GENERAL_USAGE = "<command> [arguments]; commands: " + ", ".join(NAMES) + " (try help <command>)"

_TOKEN = re.compile(r"\S+")
# Control characters are refused outright: PostgreSQL cannot store NUL, and the rest are
# never typed on purpose. Tab and newline stay (a prompt may span lines). Lone surrogates are
# refused as every surface refuses them (`scheduler.bounds`).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}", re.ASCII)
_NAME = re.compile(r"[^\s,]{1,100}")

SELECTOR_PREFIXES = ("genesis", "trigger", "repo", "label", "class")


def _help(cur: Cursor) -> c.Help:
    topic = cur.peek()
    if topic is None:
        return c.Help()
    cur.take("command")
    cur.end()
    return c.Help(_known_name(topic.lower(), cur.usage, field="help"))


def _queue(cur: Cursor) -> c.Queue:
    scope: str | None = None
    genesis: str | None = None
    while (token := cur.peek()) is not None:
        cur.take("argument")
        lowered = token.lower()
        if lowered in {"spot", "priority", "all"}:
            if scope is not None:
                raise cur.fail("filter_twice", first=scope, second=shown(token))
            scope = lowered
        elif lowered.startswith("genesis:"):
            if genesis is not None:
                raise cur.fail("genesis_twice")
            genesis = cur.genesis(token.split(":", 1)[1], "genesis")
        else:
            raise cur.fail("not_a_filter", token=shown(token))
    cls = scope if scope in {"spot", "priority"} else None
    return c.Queue(scheduling_class=cls, every_status=scope == "all", genesis=genesis)


def _holds(cur: Cursor) -> c.Holds:
    cur.end()
    return c.Holds()


def _burn(cur: Cursor) -> c.Burn:
    cur.end()
    return c.Burn()


def _one_id(make: Callable[[int], c.Command]) -> Callable[[Cursor], c.Command]:
    def parse_one(cur: Cursor) -> c.Command:
        session_id = cur.session_id()
        cur.end()
        return make(session_id)

    return parse_one


def _demote(cur: Cursor) -> c.Demote:
    session_id = cur.session_id()
    token = cur.peek()
    if token is not None and token.lower() != "top":
        raise cur.fail("only_top", token=shown(token))
    if token is not None:
        cur.take("top")
    cur.end()
    return c.Demote(session_id, top=token is not None)


def _rank(cur: Cursor) -> c.Rank:
    session_id = cur.session_id()
    where = cur.take("a place: <n>, top, above <id>, below <id> or between <id> <id>")
    lowered = where.lower()
    if lowered == "top":
        cur.end()
        return c.Rank(session_id, "top")
    if lowered in {"above", "below"}:
        other = cur.ident(cur.take(f"<id> after {lowered}"), lowered)
        cur.end()
        if other == session_id:
            raise cur.fail("beside_itself", field=lowered)
        return c.Rank(session_id, lowered, neighbours=(other,))  # type: ignore[arg-type]
    if lowered == "between":
        first = cur.ident(cur.take("two <id>s after between"), "between")
        second = cur.ident(cur.take("a second <id> after between"), "between")
        cur.end()
        if session_id in {first, second}:
            raise cur.fail("beside_itself", field="between")
        if first == second:
            raise cur.fail("two_sessions")
        return c.Rank(session_id, "between", neighbours=(first, second))
    if INT_PATTERN.fullmatch(where) is None:
        raise cur.fail("not_a_place", where=shown(where))
    value = cur.integer(where, "precedence", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)
    cur.end()
    return c.Rank(session_id, "value", precedence=value)


def _pause(cur: Cursor) -> c.Pause:
    """`pause <id>` parks in the spot queue, as `queue` says outright; `halt` stops the running
    turn there (a park only: a sleep until a time lets it finish); `with` leaves the prompt it
    resumes with."""
    session_id = cur.session_id()
    mode = (cur.peek() or "").lower()
    if mode == "until":
        cur.take("until")
        until = _until(cur)
        if (cur.peek() or "").lower() == "halt":
            raise cur.fail("halt_with_until")
        return c.Pause(session_id, until=until, resume_prompt=_with(cur))
    if mode == "queue":
        cur.take("queue")
    elif mode not in {"", "halt", "with"}:
        raise cur.fail("not_a_mode", mode=shown(cur.take("mode")))
    halt = (cur.peek() or "").lower() == "halt"
    if halt:
        cur.take("halt")
    return c.Pause(session_id, halt=halt, resume_prompt=_with(cur))


def _until(cur: Cursor) -> TimeSpec:
    token = cur.take("<time> after until")
    follow = cur.peek()
    # "2026-11-02 15:30" arrives as two words; read it as the one instant it is.
    if (
        follow is not None
        and re.fullmatch(r"\d{4}-\d{2}-\d{2}", token, re.ASCII)
        and re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", follow, re.ASCII)
    ):
        cur.take("time")
        token = f"{token}T{follow.zfill(5)}"
    return cur.lift(lambda: parse_time(token, field="until"))


def _with(cur: Cursor) -> str | None:
    """The prompt after `with`, to the end of the line (it may span lines); None without `with`."""
    token = cur.peek()
    if token is None:
        return None
    if token.lower() != "with":
        raise cur.fail("unexpected", token=shown(token))
    cur.take("with")
    prompt = cur.rest()
    if not prompt:
        raise cur.fail("missing_resume_prompt")
    return prompt


def _hold(cur: Cursor) -> c.Hold:
    selector = _selector(cur, cur.take("a selector: #id, genesis:, trigger:, repo:, label:, class: or all"))
    ttl: timedelta | None = None
    if (cur.peek() or "").lower() == "for":
        cur.take("for")
        token = cur.take("<duration> after for")
        ttl = cur.lift(lambda: parse_duration(token, field="for"))
    return c.Hold(selector, ttl=ttl, reason=cur.rest())


def _selector(cur: Cursor, token: str) -> c.Selector:
    lowered = token.lower()
    if lowered == "all":
        return c.Selector("all")
    prefix, sep, value = token.partition(":")
    if not sep:
        ids = token.split(",")
        if not all(ID_PATTERN.fullmatch(part) for part in ids):
            raise cur.fail("not_a_selector", token=shown(token))
        values = tuple(dict.fromkeys(str(cur.ident(part, "selector")) for part in ids))
        return c.Selector("session", values)
    prefix = prefix.lower()
    if prefix not in SELECTOR_PREFIXES:
        raise cur.fail("not_a_selector_kind", prefix=shown(prefix + ":"))
    if prefix == "genesis":
        return c.Selector("genesis", (cur.genesis(value, "genesis"),))
    if prefix == "trigger":
        return c.Selector("trigger", (str(cur.ident(value, "trigger")),))
    if prefix == "repo":
        if _REPO.fullmatch(value) is None:
            raise cur.fail("not_a_repository", value=shown(value))
        return c.Selector("repository", (value,))
    if prefix == "class":
        if value.lower() not in {"priority", "spot"}:
            raise cur.fail("not_a_selector_class", value=shown(value))
        return c.Selector("class", (value.lower(),))
    if _NAME.fullmatch(value) is None:
        raise cur.fail("not_a_label", value=shown(value))
    return c.Selector("label", (value,))


def _release(cur: Cursor) -> c.Release:
    hold_id = cur.ident(cur.take("<hold id>"), "hold id")
    cur.end()
    return c.Release(hold_id)


def _resume(cur: Cursor) -> c.Resume:
    group = cur.peek()
    if group is not None:
        cur.take("group")
        if _NAME.fullmatch(group) is None:
            raise cur.fail("not_a_group", group=shown(group))
    cur.end()
    return c.Resume(group)


def _trigger(cur: Cursor) -> c.TriggerShow | c.TriggerClass | c.TriggerPrecedence:
    trigger_id = cur.ident(cur.take("trigger <id>"), "trigger id")
    if cur.peek() is None:
        return c.TriggerShow(trigger_id)
    what = cur.take("class or precedence").lower()
    if what == "class":
        value = cur.take("a class: priority, spot or default")
        cur.end()
        return c.TriggerClass(trigger_id, class_choice(cur, "class", value))
    if what == "precedence":
        value = cur.take("a precedence <n>")
        cur.end()
        return c.TriggerPrecedence(
            trigger_id, cur.integer(value, "precedence", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)
        )
    raise cur.fail("not_a_trigger_setting", what=shown(what))


def _whatif(cur: Cursor) -> c.WhatIf:
    token = cur.take("<id> or --spot")
    cur.end()
    if token.lower() == "--spot":
        return c.WhatIf(spot=True)
    if ID_PATTERN.fullmatch(token) is None:
        raise cur.fail("not_an_id_or_spot", token=shown(token))
    return c.WhatIf(session_id=cur.ident(token))


PARSERS: dict[str, Callable[[Cursor], c.Command]] = {
    "help": _help,
    "queue": _queue,
    "holds": _holds,
    "burn": _burn,
    "why": _one_id(c.Why),
    "summary": _one_id(c.Summary),
    "promote": _one_id(c.Promote),
    "demote": _demote,
    "rank": _rank,
    "start": _one_id(c.Start),
    "restart": _one_id(c.Restart),
    "weight": words.weight,
    "capacity": words.capacity,
    "cap": words.cap,
    "pause": _pause,
    "archive": _one_id(c.Archive),
    "stop": _one_id(c.Stop),
    "hold": _hold,
    "release": _release,
    "resume": _resume,
    "policy": parse_policy,
    "trigger": _trigger,
    "new": words.new,
    "whatif": _whatif,
    "reply": words.reply,
}


def _known_name(word: str, usage: str, *, field: str = "command") -> str:
    if word in PARSERS:
        return word
    raise CommandError(
        error_text("grammar/not_a_command", field=field, word=shown(word), nearest=nearest_command(word)), usage
    )


def nearest_command(word: str) -> str | None:
    """The command `word` most likely meant: its synonym, else a name one slip away (a letter
    wrong, missing, extra or two swapped; two slips from seven letters on), else None."""
    if word in SYNONYMS:
        return SYNONYMS[word]
    allowed = 1 if len(word) < 7 else 2
    near = [(slips(word, name), name) for name in NAMES]
    best = min(near)
    return best[1] if best[0] <= allowed else None


def slips(a: str, b: str) -> int:
    """Typing slips between `a` and `b`: the optimal string alignment distance (Damerau-Levenshtein
    in which a swap of two neighbouring letters counts as one and no letter is edited twice)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def parse(text: str) -> c.Command:
    """Text -> Command, or CommandError(message, usage). Empty text (a bare `/pacer`) is help."""
    if len(text) > MAX_CHARS:
        raise CommandError(error_text("grammar/too_long", length=len(text), limit=MAX_CHARS), GENERAL_USAGE)
    bad = _CONTROL.search(text)
    if bad is not None:
        raise CommandError(error_text("grammar/control_character", char=bad.group()), GENERAL_USAGE)
    problem = bounds.text_problem(text)
    if problem is not None:
        raise CommandError(error_text("grammar/unstorable", problem=problem), GENERAL_USAGE)
    tokens = [Token(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    if tokens and tokens[0].text.lower() == "/pacer":
        tokens = tokens[1:]
    if not tokens:
        return c.Help()
    name = _known_name(tokens[0].text.lower(), GENERAL_USAGE)
    return PARSERS[name](Cursor(text, tokens[1:], USAGE[name]))


def usage_of(command_name: str) -> str:
    return USAGE.get(command_name, GENERAL_USAGE)
