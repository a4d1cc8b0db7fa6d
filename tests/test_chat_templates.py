"""A chat answer is one file under templates/chat/, rendered in the surface's flavour: the markup
filters of `templates.render` make the Slack and the plain sentence from the same words."""

from __future__ import annotations

import pytest

from templates import environment, render_chat


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


def test_render_chat_names_the_flavours_it_knows() -> None:
    with pytest.raises(ValueError, match="flavour 'github' is not one of text, slack"):
        render_chat("started", "github", sentence="It started.")
