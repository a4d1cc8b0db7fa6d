"""A chat answer is one file under templates/chat/, rendered in the surface's flavour: the markup
filters of `templates.render` make the Slack and the plain sentence from the same words."""

from __future__ import annotations

from pathlib import Path

import pytest

from templates import environment, render, render_chat
from tests.support.paths import ROOT

CHAT = ROOT / "templates" / "chat"


@pytest.mark.parametrize(
    ("source", "slack", "text"),
    [
        ("{{ 'a & <b>' | esc }}", "a &amp; &lt;b&gt;", "a & <b>"),
        ("{{ '#4' | strong }}", "*#4*", "#4"),
        ("{{ 'parked' | em }}", "_parked_", "parked"),
        ("{{ 'waiting' | code }}", "`waiting`", "waiting"),
        ("{% filter tag %}slack · spot{% endfilter %}", "_slack · spot_", "[slack · spot]"),
        ("`{{ 'release' | slash }} 3`", "`/pacer release 3`", "`release 3`"),
        ("{{ 'parking' | emoji }}Parked.", ":parking: Parked.", "Parked."),
        ("{{ 'x<y' | esc | slash | code }}", "`/pacer x&lt;y`", "x<y"),
    ],
)
def test_a_markup_filter_marks_up_in_slack_and_passes_text_through(source: str, slack: str, text: str) -> None:
    template = environment().from_string(source)
    assert (template.render(flavour="slack"), template.render(flavour="text")) == (slack, text)


@pytest.mark.parametrize("path", sorted(CHAT.glob("*.j2")), ids=lambda p: p.name)
def test_every_chat_template_compiles(path: Path) -> None:
    environment().get_template(f"chat/{path.name}")


def test_a_chat_template_without_a_flavour_fails_loudly_with_its_name() -> None:
    with pytest.raises(ValueError, match=r"chat/started\.j2 needs `flavour` \(text or slack\)"):
        render("chat/started.j2", sentence="It started.")


def test_a_macro_imported_without_context_cannot_guess_the_flavour() -> None:
    template = environment().from_string('{% from "chat/_chat_session.j2" import name %}{{ name(s) }}')
    with pytest.raises(ValueError, match="import its macros with context"):
        template.render(flavour="slack", s={"id": 4, "title": "fix"})


def test_render_chat_names_the_flavours_it_knows() -> None:
    with pytest.raises(ValueError, match="flavour 'github' is not one of text, slack"):
        render_chat("started", "github", sentence="It started.")
    assert render_chat("started", "slack", sentence="a<b") == "a&lt;b"
    assert render_chat("started", "text", sentence="a<b") == "a<b"
