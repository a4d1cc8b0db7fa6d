"""Subcommands beyond serve/migrate/console/config: `pacer policy` (and later surfaces)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def cmd_policy(args: argparse.Namespace) -> int:
    from bot import settings as settings_mod
    from bot.runtime import build
    from scheduler.db import session_scope
    from scheduler.fleet import read_quota
    from scheduler.gate_card import build_card, render_card
    from scheduler.policy import change_policy

    settings = settings_mod.load(os.environ, toml_path=getattr(args, "config", None))
    pacer = build(settings, deferrer=_Inert(), workers=_Inert())
    ctx = pacer.ctx
    now = ctx.clock.now()
    if args.set:
        changes = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                print(f"pacer policy: --set {item!r}: write key=value, e.g. --set max_sessions=8")
                return 2
            changes[key.strip()] = value.strip()
        from scheduler.errors import InvalidInput

        try:
            with session_scope(ctx.engine) as db:
                audit = change_policy(db, changes, surface="cli:pacer policy", actor=os.environ.get("USER"), now=now)
        except InvalidInput as exc:
            print(f"pacer policy: {exc}")
            return 2
        print(audit.line if audit else "nothing changed")
    reading = read_quota(ctx, now)
    with session_scope(ctx.engine) as db:
        card = build_card(db, ctx, reading, now)
    print(json.dumps(card.as_dict(), indent=2) if args.json else render_card(card))
    return 0


class _Inert:
    """`pacer policy` reads and writes policy; it runs no turns and arms no alarms."""

    def schedule(self, *a: Any) -> None: ...
    def cancel(self, *a: Any) -> bool: return False
    def next_run(self, *a: Any) -> None: return None
    def submit(self, *a: Any) -> None: raise RuntimeError("pacer policy runs no turns")
    def halt(self, *a: Any) -> bool: return False


def register(sub: Any) -> None:
    policy = sub.add_parser("policy", help="show the spot gate's policy and current decision", description=
        "Show what the gate would decide for a spot session now: windows, reserve, burn, "
        "sustainable rate, which ceiling holds and what lifts it, when the pool comes back. "
        "--set key=value changes the policy (audited).")
    policy.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="gating, preemption, reserve_5h, reserve_7d, max_sessions (repeatable)")
    policy.add_argument("--json", action="store_true", help="print the card as JSON (the API's shape)")
    policy.set_defaults(func=cmd_policy)
    # --- pacer simulate (P8, bot/simulate/) ---
    from bot.simulate.cli import register as register_simulate

    register_simulate(sub)
    # --- end pacer simulate ---
