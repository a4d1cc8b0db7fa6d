# The agent CLI the image carries for PACER_RUNNER=command: `claude-code` (Claude Code's `claude`,
# from npm, with the Node.js it needs) or `none` (the echo agent, or an agent you add yourself):
#   docker build --build-arg AGENT=none .
ARG AGENT=claude-code

# Claude Code asks for Node.js 22 or later; Debian's own package is older, so the official build
# is copied from Node's image.
FROM node:22-bookworm-slim AS node

FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# git makes a session's clone, and fetches and pushes its branch; without it no session that
# names a repository can run. bubblewrap is the agents' sandbox (PACER_AGENT_SANDBOX=auto uses it
# where the machine allows user namespaces, as Fly's do).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/*

FROM base AS agent-none

FROM base AS agent-claude-code
ARG CLAUDE_CODE_VERSION=latest
# The image is rebuilt to move to a new release; an agent updating itself mid-turn is not wanted.
ENV DISABLE_AUTOUPDATER=1
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
 && npm cache clean --force \
 && claude --version

# Only `none` and `claude-code` name a stage; another value stops the build there.
FROM agent-${AGENT}
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY bot ./bot
COPY scheduler ./scheduler
COPY integrations ./integrations
COPY templates ./templates
RUN pip install --no-cache-dir -c requirements.lock .
# Pacer runs as root so that it can hand each turn to pacer-agent, an unprivileged user that can
# neither read Pacer's files (/app/var is root's alone) nor signal or trace its processes, and take
# it back; the agents work under /srv/agents, which that user can pass through but not list.
RUN useradd --system --create-home pacer-agent \
 && mkdir -p /app/var /srv/agents && chmod 700 /app/var && chmod 711 /srv/agents
ENV PACER_AGENT_USER=pacer-agent PACER_WORKDIR=/srv/agents/work PACER_WORKSPACES=/srv/agents/workspaces
EXPOSE 8080
CMD ["pacer", "serve"]
