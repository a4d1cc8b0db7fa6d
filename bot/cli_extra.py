"""Subcommands added by later surfaces (policy, simulate). Each registers itself here."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    _ = argparse
