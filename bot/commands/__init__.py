"""The `/pacer` command language: typed commands (`command`), times (`times`) and the pure
parser (`grammar`). `parse` is the one entry point every surface uses."""

from bot.commands.command import Command, verb
from bot.commands.grammar import GENERAL_USAGE, USAGE, parse, usage_of

__all__ = ["GENERAL_USAGE", "USAGE", "Command", "parse", "usage_of", "verb"]
