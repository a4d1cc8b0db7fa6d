"""Surfaces render through the templates package; this name is kept for the bot's imports."""

from templates import environment, render, render_prompt, slack_escape

__all__ = ["environment", "render", "render_prompt", "slack_escape"]
