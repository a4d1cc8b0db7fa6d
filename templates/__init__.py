"""Every sentence a person reads, as Jinja2 templates, and the one environment that renders them.

`chat/` for every chat answer, one file rendered as Slack mrkdwn or plain text (`render_chat`);
`text/` for the console, the API and logs; `slack/` for Slack-only pieces (Block Kit rows, notices);
`github/` for GitHub markdown; `page/` for the live page's HTML (autoescaped); `errors/` for the
message each deliberate error carries, one file of macros per module.
The scheduler and every surface render from here, so they cannot say different things.
"""

from templates.render import environment, error_text, render, render_chat, render_html, render_prompt, slack_escape

__all__ = ["environment", "error_text", "render", "render_chat", "render_html", "render_prompt", "slack_escape"]
