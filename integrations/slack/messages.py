"""From an answer to what Slack accepts: blocks as dicts, counted and capped, with a fallback text.

An answer is anything with `text` and optional `blocks` (a `bot.chat.answers.Reply`, a notice). This
module only fits it into Slack's limits: 50 blocks in a message, 100 in App Home, 3,000
characters in a section; an answer longer than one message goes as several (`thread_messages`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from scheduler.steering.gate_card import GateCard
from templates import render

MESSAGE_BLOCK_LIMIT = 50
HOME_BLOCK_LIMIT = 100
SECTION_TEXT_LIMIT = 3000
FALLBACK_TEXT_LIMIT = 3000  # the notification preview; the blocks carry the full answer
THREAD_MESSAGE_SECTIONS = 10  # 30,000 characters a message when a long answer is split
HEADER_TEXT_LIMIT = 150
GATE_CARD_BLOCKS = 6  # what `gate_card_blocks` always returns; the App Home's queue gets the rest


def as_dicts(blocks: Sequence[Block | Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Blocks built with `slack_sdk.models` validate on `to_dict()`; plain dicts pass through."""
    out: list[dict[str, Any]] = []
    for block in blocks or ():
        out.append(block.to_dict() if isinstance(block, Block) else dict(block))
    return out


def capped(blocks: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most `limit` blocks; the last one says how many were left out."""
    if len(blocks) <= limit:
        return blocks
    left_out = len(blocks) - (limit - 1)
    more = ContextBlock(elements=[MarkdownTextObject(text=render("slack/list_more.j2", count=left_out))])
    return [*blocks[: limit - 1], more.to_dict()]


def text_blocks(text: str) -> list[dict[str, Any]]:
    """A plain answer as section blocks, split so no section passes Slack's 3,000 characters."""
    chunks: list[str] = []
    current = ""
    for line in text.splitlines() or [""]:
        while len(line) > SECTION_TEXT_LIMIT:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(line[:SECTION_TEXT_LIMIT])
            line = line[SECTION_TEXT_LIMIT:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > SECTION_TEXT_LIMIT:
            chunks.append(current)
            current = line
        else:
            current = candidate
    if current or not chunks:
        chunks.append(current or " ")
    return [SectionBlock(text=MarkdownTextObject(text=chunk)).to_dict() for chunk in chunks]


def thread_messages(text: str, *, sections: int = THREAD_MESSAGE_SECTIONS) -> list[dict[str, Any]]:
    """`text` whole, as `text` and `blocks` for as many chat.postMessage calls as it needs: at
    most `sections` sections of 3,000 characters in each, so no message nears Slack's limits
    (50 blocks, 40,000 characters of text) and nothing is cut."""
    blocks = text_blocks(text)
    out = []
    for start in range(0, len(blocks), sections):
        part = blocks[start : start + sections]
        out.append({"text": "\n".join(block["text"]["text"] for block in part), "blocks": part})
    return out


def message(reply: Any, *, limit: int = MESSAGE_BLOCK_LIMIT) -> dict[str, Any]:
    """`text` and `blocks` keyword arguments for chat.postMessage, postEphemeral or respond()."""
    blocks = as_dicts(getattr(reply, "blocks", None)) or text_blocks(reply.text)
    return {"text": _fallback(reply.text), "blocks": capped(blocks, limit)}


def gate_card_blocks(card: GateCard) -> list[dict[str, Any]]:
    """The gate card as GATE_CARD_BLOCKS blocks: a heading, the decision and why, the windows,
    when the pool comes back, the slots and the queue's counts, and a divider below."""
    values = {"card": card, "d": card.decision}

    def section(name: str) -> SectionBlock:
        return SectionBlock(text=MarkdownTextObject(text=render(f"slack/{name}.j2", **values)[:SECTION_TEXT_LIMIT]))

    heading = render("slack/gate_card_heading.j2", **values)[:HEADER_TEXT_LIMIT]
    fleet = render("slack/gate_card_fleet.j2", **values)[:SECTION_TEXT_LIMIT]
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=heading)),
        section("gate_card_decision"),
        section("gate_card_windows"),
        section("gate_card_pool"),
        ContextBlock(elements=[MarkdownTextObject(text=fleet)]),
        DividerBlock(),
    ]
    return as_dicts(blocks)


def home_view(reply: Any, *, above: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The App Home view for views.publish: the blocks `above` (the gate card), then the
    answer's blocks, at most 100 in all."""
    blocks = [*as_dicts(above), *(as_dicts(getattr(reply, "blocks", None)) or text_blocks(reply.text))]
    view = View(type="home", blocks=capped(blocks, HOME_BLOCK_LIMIT))
    return view.to_dict()


def _fallback(text: str) -> str:
    return text if len(text) <= FALLBACK_TEXT_LIMIT else text[: FALLBACK_TEXT_LIMIT - 1] + "…"
