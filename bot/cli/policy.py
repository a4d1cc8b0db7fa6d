"""`pacer policy` (the gate card, `--set`, `--reset-spend`), and the registration of `pacer simulate`:
the subcommands beyond serve, worker, migrate, console and config."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def cmd_policy(args: argparse.Namespace) -> int:
    from bot.config import settings as settings_mod
    from bot.runtime.process import build
    from scheduler.front import build_card, read_quota, render_card, session_scope

    settings = settings_mod.load(os.environ, toml_path=getattr(args, "config", None))
    # The APScheduler deferrer, started paused: a queue pass this change asks for lands in the
    # shared job store, where the leading `pacer serve` runs it; this process runs no alarm.
    pacer = build(settings, workers=_Inert())
    ctx = pacer.ctx
    if args.set or args.reset_spend:
        pacer.scheduler.start(paused=True)
        try:
            code = _set_policy(ctx, ["reset-spend", args.reset_spend] if args.reset_spend else ["set", *args.set])
        finally:
            pacer.scheduler.shutdown(wait=False)
        if code:
            return code
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    with session_scope(ctx.engine) as db:
        card = build_card(db, ctx, reading, now)
    print(json.dumps(card.as_dict(), indent=2) if args.json else render_card(card))
    return 0


def _set_policy(ctx: Any, words: list[str]) -> int:
    """`--set key=value …` (words "set", pairs…) or `--reset-spend <runtime>` (words
    "reset-spend", runtime) in the `/pacer policy` grammar, through the one policy change every
    surface makes (the write, the audit line, the queue pass)."""
    from bot.chat.changing import shown
    from bot.commands import command as c
    from bot.commands import parse
    from scheduler.errors import CommandError, InvalidInput
    from scheduler.front import PolicyAudit, reset_spend, set_policy
    from templates import error_text, render_chat

    try:
        spaced = next((item for item in words[1:] if not item.strip() or any(ch.isspace() for ch in item)), None)
        if spaced is not None:
            raise InvalidInput(error_text("cli/set_one_pair", item=spaced), field="--set")
        command = parse("policy " + " ".join(words))
        assert isinstance(command, c.PolicySet)
        audit: PolicyAudit | None
        if command.reset_spend:
            audit = reset_spend(ctx, command.reset_spend[0], surface="cli:pacer policy", actor=os.environ.get("USER"))
        else:
            audit = set_policy(
                ctx,
                dict(command.changes),
                merge=command.merged(),
                surface="cli:pacer policy",
                actor=os.environ.get("USER"),
            )
    except CommandError as exc:
        print(render_chat("command_error", "text", message=str(exc), usage=exc.usage))
        return 2
    except InvalidInput as exc:
        print(render_chat("command_error", "text", message=str(exc), usage=USAGE))
        return 2
    moved = [(key, shown(old), shown(new)) for key, (old, new) in (audit.changes if audit else {}).items()]
    print(render_chat("policy_set", "text", moved=moved, line=audit.line if audit else None))
    return 0


USAGE = "pacer policy [--set key=value …] [--reset-spend <runtime>] [--json]"


class _Inert:
    """`pacer policy` runs no turns."""

    def submit(self, *a: Any) -> None: raise RuntimeError("pacer policy runs no turns")
    def halt(self, *a: Any) -> bool: return False


def register(sub: Any) -> None:
    policy = sub.add_parser("policy", help="show the spot gate's policy and current decision", description=
        "Show what the gate would decide for a spot session now: windows, reserve, burn, "
        "sustainable rate, which ceiling holds and what lifts it, when the pool comes back. "
        "--set key=value changes the policy (audited).")
    policy.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="gating=on|off, preemption=on|off, demand_pacing=on|off, overage_spot=on|off, "
                        "reserve_5h=<pct>, "
                        "reserve_7d=<pct>, max_sessions=<n>, top_up=<n>, top_up_stretch=<minutes>, "
                        "top_up_cooldown=<minutes>, "
                        "override:<genesis>=priority|spot|default, budget:<runtime>=<usd>|none "
                        "(repeatable; the keys /pacer policy set takes)")
    policy.add_argument(
        "--reset-spend",
        metavar="RUNTIME",
        help="count RUNTIME's spend against its cost budget from now (audited; lifts a cost-budget hold)",
    )
    policy.add_argument("--json", action="store_true", help="print the card as JSON (the API's shape)")
    policy.set_defaults(func=cmd_policy)
    # --- pacer simulate (P8, bot/simulate/) ---
    from bot.simulate.cli import register as register_simulate

    register_simulate(sub)
    # --- end pacer simulate ---
