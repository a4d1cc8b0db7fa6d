"""One Jinja2 environment over `templates/`, the single source of every sentence a person reads.

Three flavours share the files: `text` (console, API, logs), `slack` (mrkdwn; only &, <, > are
escaped, as Slack does) and `github` (markdown). Trigger authors' prompt templates render in a
sandbox, so a template can read data but never run code.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment


def slack_escape(value: Any) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _money(value: Any) -> str:
    return f"${float(value):,.2f}"


def _pct(value: Any) -> str:
    return f"{float(value) * 100:.1f}%"


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "—"


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
    env.filters.update(slack=slack_escape, money=_money, pct=_pct, when=_when, repr=repr)
    return env


@lru_cache(maxsize=1)
def environment() -> Environment:
    return _environment(autoescape=False)


def render(name: str, **context: Any) -> str:
    """Render `templates/<name>` and strip the trailing whitespace a block leaves."""
    return environment().get_template(name).render(**context).strip()


@lru_cache(maxsize=1)
def html_environment() -> Environment:
    """The live page's environment: the same files and filters, with HTML autoescape on, since a
    session's title or a hold's reason is text someone typed and the page is HTML."""
    return _environment(autoescape=True)


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
