"""Block Kit for the answers that are lists: the ranked queue and the holds. Built with
`slack_sdk.models.blocks`, so `to_dict()` validates every block, and capped by count with a
closing "and N more" line (50 in a message, 100 in App Home).

The action ids and option values are the contract with `bot/slack/actions.py`:
`pacer.queue_row` overflow values "why:42" "promote:42" "start:42" "demote_top:42" "archive:42", and
`pacer.hold_release` buttons carrying the operator hold id.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    Option,
    OverflowMenuElement,
    PlainTextObject,
    SectionBlock,
)

from bot.chat.queue_view import QueueRow, QueueView
from templates import render, render_chat

QUEUE_ROW = "pacer.queue_row"
HOLD_RELEASE = "pacer.hold_release"
ARCHIVABLE = frozenset({"waiting", "needs_input", "failed"})
HEADER_LIMIT = 150


def mrkdwn(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text[:3000])


MENU_VERBS = ("why", "promote", "start", "demote_top", "archive")


def menu_labels() -> dict[str, str]:
    """Each ⋮ entry's label, rendered once per answer rather than once per row."""
    return {verb: render("slack/queue_menu.j2", option=verb) for verb in MENU_VERBS}


def row_menu(row: QueueRow, labels: dict[str, str]) -> OverflowMenuElement | None:
    """The row's ⋮ menu: only the entries that can do something for a row in this state."""
    verbs: list[str] = []
    if row.position is not None:  # a waiter: why it waits, and its place on the ladder
        verbs.append("why")
    if row.scheduling_class == "spot" and row.status not in {"done", "archived"}:
        verbs.append("promote")
    if row.status == "waiting":
        verbs.append("start")
    if row.scheduling_class == "priority" and row.status not in {"done", "archived"}:
        verbs.append("demote_top")
    if row.status in ARCHIVABLE:
        verbs.append("archive")
    if not verbs:
        return None
    options = [
        Option(value=f"{verb}:{row.id}", text=PlainTextObject(text=labels[verb]))
        for verb in verbs
    ]
    return OverflowMenuElement(action_id=QUEUE_ROW, options=options)


def capped(blocks: list[Block], counts: list[int], limit: int, hidden: int) -> list[dict[str, Any]]:
    """Keep at most `limit` blocks. `counts[i]` is how many list entries block i shows; those
    cut, plus `hidden` entries never fetched, are named in the closing line."""
    if len(blocks) > limit or hidden:
        keep = min(len(blocks), limit - 1)
        hidden += sum(counts[keep:])
        blocks = blocks[:keep]
    if hidden:
        blocks.append(ContextBlock(elements=[mrkdwn(render("slack/list_more.j2", count=hidden))]))
    return [block.to_dict() for block in blocks]


def queue_blocks(view: QueueView, *, limit: int) -> list[dict[str, Any]]:
    heading = render("slack/queue_heading.j2", view=view)[:HEADER_LIMIT]
    blocks: list[Block] = [HeaderBlock(text=PlainTextObject(text=heading))]
    counts = [0]
    labels = menu_labels()
    for cls, rows, total in (("priority", view.priority, view.priority_total), ("spot", view.spot, view.spot_total)):
        if total == 0:
            continue
        blocks.append(ContextBlock(elements=[mrkdwn(render("slack/queue_section.j2", cls=cls, total=total))]))
        counts.append(0)
        for row in rows:
            text = render("slack/queue_row.j2", row=row, of=view.waiting_total)
            blocks.append(SectionBlock(text=mrkdwn(text), accessory=row_menu(row, labels)))
            counts.append(1)
    if len(blocks) == 1:
        blocks.append(SectionBlock(text=mrkdwn(render("slack/queue_empty.j2", view=view))))
        counts.append(0)
    return capped(blocks, counts, limit, view.not_shown)


def operator_hold_blocks(holds: list[Any], *, now: Any) -> list[Block]:
    """One section per operator hold in force, each with its Release button."""
    out: list[Block] = []
    for hold in holds:
        text = render("slack/holds_operator_row.j2", hold=hold, now=now)
        button = ButtonElement(
            action_id=HOLD_RELEASE,
            value=str(hold.id),
            text=PlainTextObject(text=render("slack/holds_release_label.j2")),
        )
        out.append(SectionBlock(text=mrkdwn(text), accessory=button))
    return out


def cycling_blocks(cycling: Any) -> list[Block]:
    """The preemption cycling report (`scheduler.rules.cycling.Cycling`) as one section, or nothing
    when no session or pair is cycling: the holds answer and the App Home show it alike."""
    if cycling is None or cycling.empty:
        return []
    return [SectionBlock(text=mrkdwn(render_chat("cycling", "slack", cycling=cycling)))]


def holds_blocks(values: dict[str, Any], *, now: Any, limit: int) -> list[dict[str, Any]]:
    """`/pacer holds` in Block Kit: the cycling first, so a long list never cuts it, then the
    queue holds, the operator holds and the held sessions, capped at `limit` blocks."""
    out: list[Block] = [HeaderBlock(text=PlainTextObject(text=render("slack/holds_heading.j2", **values)))]
    counts = [0]
    for block in cycling_blocks(values["cycling"]):
        out.append(block)
        counts.append(0)
    for hold in values["queue_holds"]:
        out.append(SectionBlock(text=mrkdwn(render("slack/holds_queue_row.j2", hold=hold))))
        counts.append(1)
    for block in operator_hold_blocks(values["operator_holds"], now=now):
        out.append(block)
        counts.append(1)
    seen = SimpleNamespace(firsts={})  # a sentence is shown at its first row, and named by it after
    for held in values["sessions"]:
        out.append(SectionBlock(text=mrkdwn(render("slack/holds_session_row.j2", held=held, seen=seen))))
        counts.append(1)
    if not (values["queue_holds"] or values["operator_holds"] or values["sessions"]):
        out.append(ContextBlock(elements=[mrkdwn(render("slack/holds_none.j2"))]))
        counts.append(0)
    return capped(out, counts, limit, values["sessions_not_shown"])
