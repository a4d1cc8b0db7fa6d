FROM python:3.11-slim
# The agent CLI the image carries for PACER_RUNNER=command: `claude-code` (Claude Code's `claude`,
# from npm, so Node.js comes with it) or `none` (the echo agent, or an agent you add yourself):
#   docker build --build-arg AGENT=none .
ARG AGENT=claude-code
ARG CLAUDE_CODE_VERSION=latest
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DISABLE_AUTOUPDATER=1
# git makes a session's worktree, and fetches and pushes its branch; without it no session that
# names a repository can run.
RUN set -eux; \
    case "$AGENT" in claude-code|none) ;; *) echo "AGENT must be claude-code or none, not $AGENT" >&2; exit 1;; esac; \
    apt-get update; \
    apt-get install -y --no-install-recommends git ca-certificates; \
    if [ "$AGENT" = "claude-code" ]; then \
        apt-get install -y --no-install-recommends nodejs npm; \
        npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"; \
        npm cache clean --force; \
        claude --version; \
    fi; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY bot ./bot
COPY scheduler ./scheduler
COPY integrations ./integrations
COPY templates ./templates
RUN pip install --no-cache-dir -c requirements.lock .
RUN useradd --system --create-home pacer && mkdir -p /app/var && chown pacer /app/var
USER pacer
EXPOSE 8080
CMD ["pacer", "serve"]
