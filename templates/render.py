"""One Jinja2 environment over `templates/`, the single source of every sentence a person reads.

A chat answer is one file under `chat/` rendered in either flavour, `text` (console, API, CLI) or
`slack` (mrkdwn): the markup filters below read `flavour` from the context, so the Slack and the
plain sentence cannot drift apart. Trigger authors' prompt templates render in a sandbox, so a
template can read data but never run code.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

FLAVOURS = ("text", "slack")


def slack_escape(value: Any) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _money(value: Any) -> str:
    return f"${float(value):,.2f}"


def _pct(value: Any) -> str:
    return f"{float(value) * 100:.1f}%"


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "—"


def _span(value: Any) -> str:
    """A length of time as the live page says it: "3 d 4 h", "2 h 05 min", "12 min"."""
    minutes = max(int(value.total_seconds() // 60), 0)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {mins:02d} min" if hours else f"{mins} min"


def _words(value: Any) -> str:
    """A reason code (`at_utilization_limit`) as the words a person reads (`text/reason_words.j2`)."""
    return render("text/reason_words.j2", reason=str(value))


def _is_slack(context: Context) -> bool:
    flavour: object = context.resolve_or_missing("flavour")
    if flavour not in FLAVOURS:
        raise ValueError(f"{context.name} needs `flavour` ({' or '.join(FLAVOURS)}) in its context, not {flavour!r}: "
                         "render it with render_chat, and import its macros with context")
    return flavour == "slack"


def _flavoured(slack: Callable[[Any], str], text: Callable[[Any], Any] = lambda value: value) -> Callable[..., Any]:
    # In text the value passes through untouched, so the page's autoescape still sees it as it is.
    @pass_context
    def mark(context: Context, value: Any) -> Any:
        return slack(value) if _is_slack(context) else text(value)

    return mark


MARKUP = {
    "esc": _flavoured(slack_escape),  # what someone typed: Slack would read &, <, > as markup
    "strong": _flavoured(lambda value: f"*{value}*"),
    "em": _flavoured(lambda value: f"_{value}_"),
    "code": _flavoured(lambda value: f"`{value}`"),
    "tag": _flavoured(lambda value: f"_{value}_", lambda value: f"[{value}]"),  # "genesis · class"
    "slash": _flavoured(lambda value: f"/pacer {value}"),  # a command as the surface types it
    "emoji": _flavoured(lambda value: f":{value}: ", lambda value: ""),  # Slack's lead emoji
}


def _environment(*, autoescape: bool) -> Environment:
    env = Environment(
        loader=PackageLoader("templates", ""),
        undefined=StrictUndefined,
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        auto_reload=False,  # the files ship with the package: no stat() per sentence rendered
    )
    env.filters.update(
        slack=slack_escape, money=_money, pct=_pct, when=_when, span=_span, repr=repr, words=_words, **MARKUP
    )
    return env


@lru_cache(maxsize=1)
def environment() -> Environment:
    return _environment(autoescape=False)


def render(name: str, **context: Any) -> str:
    """Render `templates/<name>` and strip the trailing whitespace a block leaves."""
    return environment().get_template(name).render(**context).strip()


def render_chat(name: str, flavour: str, **context: Any) -> str:
    """Render the chat answer `templates/chat/<name>.j2` in `flavour`: `slack` or `text`."""
    if flavour not in FLAVOURS:
        raise ValueError(f"chat/{name}.j2: flavour {flavour!r} is not one of {', '.join(FLAVOURS)}")
    return render(f"chat/{name}.j2", flavour=flavour, **context)


@lru_cache(maxsize=1)
def html_environment() -> Environment:
    """The live page's environment: the same files and filters, with HTML autoescape on, since a
    session's title or a hold's reason is text someone typed and the page is HTML. The page shows
    the plain-text sentences of `chat/`, so its flavour is `text`."""
    env = _environment(autoescape=True)
    env.globals["flavour"] = "text"
    return env


def render_html(name: str, **context: Any) -> str:
    """Render `templates/<name>` as HTML, every value escaped."""
    return html_environment().get_template(name).render(**context).strip()


def error_text(name: str, /, **context: Any) -> str:
    """The sentence an error carries: `name` is "<module>/<macro>", a macro in `templates/errors/<module>.j2`.

    One file per module keeps a module's sentences side by side; a macro's parameters are the
    values the sentence names, so a missing or misspelt one fails loudly.
    """
    module, _, macro = name.partition("/")
    sentence = getattr(environment().get_template(f"errors/{module}.j2").module, macro)
    return str(sentence(**context)).strip()


_sandbox = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


@lru_cache(maxsize=256)
def _compiled(source: str) -> Any:
    # Compiling costs a millisecond or two; a trigger's template is the same on every fire.
    return _sandbox.from_string(source)


def render_prompt(source: str, **context: Any) -> str:
    """A trigger's prompt template, rendered in the sandbox."""
    rendered: str = _compiled(source).render(**context)
    return rendered.strip()


def compile_prompt(source: str) -> None:
    """Compile a trigger's prompt template in the same sandbox, without rendering it: a syntax
    error raises jinja2.TemplateSyntaxError, which carries the line."""
    _compiled(source)
