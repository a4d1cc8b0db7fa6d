"""What a deploy stands on: plain `alembic` from the repository root, one migration head,
APScheduler's table made by a migration, fly.toml's numbers and the GitHub App manifest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from bot.config.settings import VARIABLES, load
from scheduler.store import db as dbmod
from tests.support.paths import ROOT


def _alembic(*args: str, url: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "alembic", *args], cwd=cwd, env={**env, "DATABASE_URL": url},
                          capture_output=True, text=True, timeout=120)


def test_the_migrations_have_exactly_one_head() -> None:
    heads = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_heads()
    assert len(heads) == 1, f"more than one head: {heads}; chain the newest revision after the other"


def test_plain_alembic_upgrades_the_database_named_by_database_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/plain.db"
    done = _alembic("upgrade", "head", url=url)
    assert done.returncode == 0, done.stderr
    current = _alembic("current", url=url)
    [head] = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_heads()
    assert f"{head} (head)" in current.stdout
    tables = set(inspect(dbmod.make_engine(url)).get_table_names())
    assert {"sessions", "turns", "apscheduler_jobs", "alembic_version"} <= tables


def test_the_job_table_is_made_by_the_migration_and_kept_where_apscheduler_made_it(any_engine) -> None:
    url = any_engine.url.render_as_string(hide_password=False)
    with any_engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS apscheduler_jobs"))
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    cfg = dbmod.alembic_config(url)
    from alembic import command

    script = ScriptDirectory.from_config(cfg)
    before = next(rev.down_revision for rev in script.walk_revisions() if rev.revision == _job_table_revision(script))
    command.stamp(cfg, str(before))
    # An older Pacer's APScheduler made the table itself, and armed an alarm in it.
    with any_engine.begin() as conn:
        conn.execute(
            text(
                "CREATE TABLE apscheduler_jobs (id VARCHAR(191) NOT NULL PRIMARY KEY, next_run_time FLOAT, job_state "
                "BYTEA NOT NULL)"
                if any_engine.dialect.name == "postgresql"
                else "CREATE TABLE apscheduler_jobs (id VARCHAR(191) NOT NULL PRIMARY KEY, next_run_time FLOAT, job_state BLOB NOT NULL)"
            )
        )
        conn.execute(text("INSERT INTO apscheduler_jobs VALUES ('recheck:1', 1.0, :s)"), {"s": b"state"})
    command.upgrade(cfg, "head")
    with any_engine.connect() as conn:
        assert conn.execute(text("SELECT id FROM apscheduler_jobs")).scalars().all() == ["recheck:1"]
    # From nothing, the migration makes the table with APScheduler's columns.
    with any_engine.begin() as conn:
        conn.execute(text("DROP TABLE apscheduler_jobs"))
    command.stamp(cfg, str(before))
    command.upgrade(cfg, "head")
    columns = {c["name"]: c for c in inspect(any_engine).get_columns("apscheduler_jobs")}
    assert set(columns) == {"id", "next_run_time", "job_state"} and not columns["job_state"]["nullable"]


def _job_table_revision(script: ScriptDirectory) -> str:
    [revision] = [rev.revision for rev in script.walk_revisions() if "apscheduler_jobs" in Path(str(rev.path)).name]
    return revision


def test_a_new_revision_lands_where_the_readme_says(tmp_path: Path) -> None:
    # A copy of the scheduler package, so the repository's own folder is left alone. Whole: run
    # from the copy, a `scheduler/store/` holding only the migrations would hide the real store.
    import shutil

    shutil.copytree(ROOT / "scheduler", tmp_path / "scheduler", ignore=shutil.ignore_patterns("__pycache__"))
    ini = (ROOT / "alembic.ini").read_text()
    (tmp_path / "alembic.ini").write_text(ini)
    [head] = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_heads()
    rev_id = f"{int(head) + 1:04d}"
    done = _alembic("revision", "--rev-id", rev_id, "-m", "add a thing", url=f"sqlite:///{tmp_path}/r.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    made = tmp_path / "scheduler" / "store" / "migrations" / "versions" / f"{rev_id}_add_a_thing.py"
    assert made.is_file() and f"down_revision = {head!r}" in made.read_text()


# --- fly.toml ------------------------------------------------------------------------------------


def test_fly_gives_a_running_turn_time_to_finish_and_the_machine_a_gigabyte() -> None:
    fly = tomllib.loads((ROOT / "fly.toml").read_text())
    drain = float(fly["env"]["PACER_DRAIN_SECONDS"])
    kill_timeout = int(fly["kill_timeout"])
    assert drain + 30 <= kill_timeout <= 300, (
        "the drain and the hand-over fit inside kill_timeout (shared CPUs allow 300 s)"
    )
    assert fly["kill_signal"] == "SIGTERM"
    assert fly["processes"]["app"] == "pacer serve"
    assert all(
        vm["memory"] in {"1gb", "1024mb", "2gb", "2048mb"} or int(re.sub(r"\D", "", vm["memory"])) >= 1024
        for vm in fly["vm"]
    )
    assert fly["http_service"]["processes"] == ["app"]
    assert fly["deploy"]["release_command"] == "pacer migrate"
    assert load(fly["env"], toml_path=None).drain_seconds == drain  # fly's values are valid settings
    assert "worker" in (ROOT / "fly.toml").read_text()  # the process group P12 adds, ready to uncomment


# --- the GitHub App manifest ---------------------------------------------------------------------


def test_the_github_app_manifest_asks_for_what_pacer_uses() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "github-app.yml").read_text())
    assert manifest["default_permissions"] == {
        "issues": "write",
        "pull_requests": "write",
        "contents": "write",
        "metadata": "read",
        "checks": "read",
        "actions": "read",
    }
    # `labeled` arrives as the issues / pull_request event with action "labeled"; GitHub's
    # "label" event is a label being created or edited, which Pacer does not read.
    assert set(manifest["default_events"]) == {
        "issues", "issue_comment", "pull_request", "check_run", "check_suite", "workflow_run", "pull_request_review",
        "pull_request_review_comment",
    }
    assert manifest["hook_attributes"]["url"].endswith("/github/webhook")
    assert manifest["public"] is False


def test_the_readme_names_the_events_and_labels_a_deploy_needs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pacer:priority" in readme and "pacer:hold" in readme
    assert "fly secrets set" in readme and "deploy/github-app.yml" in readme
    assert re.search(r"\bLabel\b event", readme) is None or "not the" in readme
    assert "alembic revision" in readme
    for name in ("DATABASE_URL", "GITHUB_WEBHOOK_SECRET", "PACER_DRAIN_SECONDS"):
        assert name in readme or name in {v.name for v in VARIABLES}


# --- the Dockerfile ------------------------------------------------------------------------------


def _dockerfile() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The Dockerfile's global build arguments with their defaults, and each stage's instructions
    (continuation lines joined) by its name; the last stage is named `final`."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    args: dict[str, str] = {}
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("FROM "):
            words = line.split()
            current = stages.setdefault(words[3] if len(words) > 3 and words[2].upper() == "AS" else "final", [])
        elif current is None and line.startswith("ARG "):
            name, _, default = line.removeprefix("ARG ").partition("=")
            args[name] = default
        if current is not None:
            current.append(line)
    return args, stages


def _run(tmp_path: Path, step: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """A RUN step under sh as `docker build` runs it, with stand-ins for the tools it calls that
    only write down what they were asked."""
    fakes = tmp_path / "bin"
    fakes.mkdir(parents=True)
    called = tmp_path / "called"
    for tool in ("apt-get", "rm", "ln", "npm", "claude"):
        (fakes / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {called}\n')
        (fakes / tool).chmod(0o755)
    done = subprocess.run(["sh", "-c", step.removeprefix("RUN ")], env={"PATH": f"{fakes}:/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=30)
    return done, called.read_text() if called.exists() else ""


def test_the_agent_build_argument_picks_a_stage_claude_code_by_default() -> None:
    args, stages = _dockerfile()
    assert args["AGENT"] == "claude-code" and stages["final"][0] == "FROM agent-${AGENT}"
    assert stages["agent-none"] == ["FROM base AS agent-none"]  # nothing more: no Node.js, no agent
    assert stages["agent-claude-code"][0] == "FROM base AS agent-claude-code"
    node = re.fullmatch(r"FROM node:(\d+)-[a-z-]+ AS node", stages["node"][0])
    assert node and int(node.group(1)) >= 22, "Claude Code asks for Node.js 22 or later"
    copied = [line for line in stages["agent-claude-code"] if line.startswith("COPY --from=node ")]
    assert {line.split()[-1] for line in copied} == {"/usr/local/bin/node", "/usr/local/lib/node_modules/npm"}


def test_every_image_has_git(tmp_path: Path) -> None:
    _args, stages = _dockerfile()
    [step] = [line for line in stages["base"] if line.startswith("RUN ")]
    done, called = _run(tmp_path, step, {})
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y --no-install-recommends git ca-certificates" in called


@pytest.mark.parametrize(
    ("version", "asked"), [(None, "@anthropic-ai/claude-code@latest"), ("2.1.3", "@anthropic-ai/claude-code@2.1.3")]
)
def test_the_claude_code_stage_installs_the_cli_with_npm(tmp_path: Path, version: str | None, asked: str) -> None:
    _args, stages = _dockerfile()
    stage = stages["agent-claude-code"]
    [default] = [line.partition("=")[2] for line in stage if line.startswith("ARG CLAUDE_CODE_VERSION=")]
    [step] = [line for line in stage if line.startswith("RUN ")]
    done, called = _run(tmp_path, step, {"CLAUDE_CODE_VERSION": version or default})
    assert done.returncode == 0, done.stderr
    assert called.splitlines() == [
        "ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm",
        f"npm install -g {asked}",
        "npm cache clean --force",
        "claude --version",
    ]


def test_the_image_installs_pacer_at_the_locked_versions() -> None:
    _args, stages = _dockerfile()
    assert "COPY pyproject.toml README.md requirements.lock ./" in stages["final"]
    assert "RUN pip install --no-cache-dir -c requirements.lock ." in stages["final"]


# --- the Slack app manifest ----------------------------------------------------------------------

# Each scope the manifest asks for, and what of Pacer's needs it.
SLACK_SCOPES = {
    "app_mentions:read": "the app_mention event (@Pacer <prompt>)",
    "chat:write": "chat.postMessage and chat.postEphemeral",
    "commands": "the /pacer slash command",
    "im:history": "the message.im event (DMs)",
    "channels:history": "the message.channels event (slack triggers, thread replies)",
    "groups:history": "the message.groups event (the same in private channels)",
}
# The Web API methods Pacer calls, and the scope each needs (views.publish needs none).
SLACK_METHODS = {
    "chat_postMessage": "chat:write", "chat_postEphemeral": "chat:write", "chat_update": "chat:write",
    "views_publish": None,
    "auth_test": None,  # any token may ask; Bolt asks it too
}


def test_the_slack_manifest_asks_for_the_events_and_scopes_pacer_uses_and_no_more() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == set(SLACK_SCOPES)
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_home_opened", "app_mention", "message.channels", "message.groups", "message.im"}
    source = "\n".join(p.read_text() for folder in ("bot", "integrations") for p in (ROOT / folder).rglob("*.py"))
    called = set(
        re.findall(
            r"\.((?:admin|apps|auth|bookmarks|chat|conversations|files|pins|reactions|team|usergroups|users|views)_[A-Za-z]+)\(",
            source,
        )
    )
    assert called <= set(SLACK_METHODS), (
        "a new Web API method: add the scope it needs to deploy/slack-manifest.yaml and here"
    )
    assert {scope for scope in SLACK_METHODS.values() if scope} <= set(SLACK_SCOPES)


def _urls(node: object, path: str = "") -> list[str]:
    """Where a manifest names a URL (a key `url` or `request_url`), by its path."""
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _urls(value, f"{path}.{key}")] + [
            f"{path}.{key}" for key in node if key in ("url", "request_url")
        ]
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in _urls(item, f"{path}[{i}]")]
    return []


def test_the_socket_mode_manifest_is_the_same_app_without_request_urls() -> None:
    http = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text())
    socket = yaml.safe_load((ROOT / "deploy" / "slack-manifest-socket.yaml").read_text())
    assert http["settings"]["socket_mode_enabled"] is False and socket["settings"]["socket_mode_enabled"] is True
    assert _urls(http) and _urls(socket) == []  # over the socket, events, commands and actions need no URL
    assert socket["settings"]["interactivity"]["is_enabled"] is True

    def without_urls(node: object) -> object:
        if isinstance(node, dict):
            return {k: without_urls(v) for k, v in node.items() if k not in ("url", "request_url", "socket_mode_enabled")}
        return [without_urls(v) for v in node] if isinstance(node, list) else node

    assert without_urls(socket) == without_urls(http)  # the same scopes, events, command and home


def test_the_readme_sets_up_slack_with_either_manifest_and_invites_the_bot() -> None:
    readme = (ROOT / "README.md").read_text()
    slack = readme[readme.index("## Connecting Slack"):readme.index("## Connecting GitHub")]
    assert "deploy/slack-manifest.yaml" in slack and "deploy/slack-manifest-socket.yaml" in slack
    [step] = [s for s in re.split(r"\n(?=\d+\. )", slack) if "/invite @Pacer" in s]
    assert "`PACER_OPS_CHANNEL`" in step  # the channel holds are announced in: a bot posts only where it is a member


def test_on_fly_the_edge_proxys_forwarded_scheme_is_trusted() -> None:
    """Fly's proxy ends TLS: there uvicorn trusts X-Forwarded-Proto from any address, so an https
    request is seen as one (the live page's cookie is then Secure); elsewhere its default stands."""
    from bot.serve.server import proxy_options

    assert proxy_options({"FLY_APP_NAME": "pacer"}) == {"forwarded_allow_ips": "*"}
    assert proxy_options({}) == {}
