"""Every sentence a person reads, as Jinja2 templates, and the one environment that renders them.

`text/` for the console, the API and logs; `slack/` for Slack mrkdwn; `github/` for GitHub
markdown. The scheduler and every surface render from here, so they cannot say different things.
"""

from templates.render import environment, render, render_prompt, slack_escape

__all__ = ["environment", "render", "render_prompt", "slack_escape"]
