"""What a deploy stands on: plain `alembic` from the repository root, one migration head,
APScheduler's table made by a migration, fly.toml's numbers and the GitHub App manifest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from bot.settings import VARIABLES, load
from scheduler import db as dbmod

ROOT = Path(__file__).resolve().parents[1]


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
        conn.execute(text("CREATE TABLE apscheduler_jobs (id VARCHAR(191) NOT NULL PRIMARY KEY, next_run_time FLOAT, job_state BYTEA NOT NULL)"
                          if any_engine.dialect.name == "postgresql" else
                          "CREATE TABLE apscheduler_jobs (id VARCHAR(191) NOT NULL PRIMARY KEY, next_run_time FLOAT, job_state BLOB NOT NULL)"))
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
    # A copy of the migrations, so the repository's own folder is left alone.
    import shutil

    shutil.copytree(ROOT / "scheduler" / "migrations", tmp_path / "scheduler" / "migrations")
    ini = (ROOT / "alembic.ini").read_text()
    (tmp_path / "alembic.ini").write_text(ini)
    [head] = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_heads()
    rev_id = f"{int(head) + 1:04d}"
    done = _alembic("revision", "--rev-id", rev_id, "-m", "add a thing", url=f"sqlite:///{tmp_path}/r.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    made = tmp_path / "scheduler" / "migrations" / "versions" / f"{rev_id}_add_a_thing.py"
    assert made.is_file() and f"down_revision = {head!r}" in made.read_text()


# --- fly.toml ------------------------------------------------------------------------------------


def test_fly_gives_a_running_turn_time_to_finish_and_the_machine_a_gigabyte() -> None:
    fly = tomllib.loads((ROOT / "fly.toml").read_text())
    drain = float(fly["env"]["PACER_DRAIN_SECONDS"])
    kill_timeout = int(fly["kill_timeout"])
    assert drain + 30 <= kill_timeout <= 300, "the drain and the hand-over fit inside kill_timeout (shared CPUs allow 300 s)"
    assert fly["kill_signal"] == "SIGTERM"
    assert fly["processes"]["app"] == "pacer serve"
    assert all(vm["memory"] in {"1gb", "1024mb", "2gb", "2048mb"} or int(re.sub(r"\D", "", vm["memory"])) >= 1024 for vm in fly["vm"])
    assert fly["http_service"]["processes"] == ["app"]
    assert fly["deploy"]["release_command"] == "pacer migrate"
    assert load(fly["env"], toml_path=None).drain_seconds == drain  # fly's values are valid settings
    assert "worker" in (ROOT / "fly.toml").read_text()  # the process group P12 adds, ready to uncomment


# --- the GitHub App manifest ---------------------------------------------------------------------


def test_the_github_app_manifest_asks_for_what_pacer_uses() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "github-app.yml").read_text())
    assert manifest["default_permissions"] == {"issues": "write", "pull_requests": "write", "contents": "write", "metadata": "read"}
    # `labeled` arrives as the issues / pull_request event with action "labeled"; GitHub's
    # "label" event is a label being created or edited, which Pacer does not read.
    assert set(manifest["default_events"]) == {"issues", "issue_comment", "pull_request"}
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


def _dockerfile() -> tuple[dict[str, str], str]:
    """The Dockerfile's build arguments with their defaults, and its RUN step that installs packages."""
    lines = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    args = dict(line.removeprefix("ARG ").partition("=")[::2] for line in lines if line.startswith("ARG "))
    [install] = [line.removeprefix("RUN ") for line in lines if line.startswith("RUN ") and "apt-get" in line]
    return args, install


def _install(tmp_path: Path, **build_args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """The install step run by sh as `docker build` would, with stand-ins for apt-get, npm, claude
    and rm on PATH that only write down what they were asked."""
    defaults, script = _dockerfile()
    fakes = tmp_path / "bin"
    fakes.mkdir(parents=True)
    called = tmp_path / "called"
    for tool in ("apt-get", "npm", "claude", "rm"):
        (fakes / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {called}\n')
        (fakes / tool).chmod(0o755)
    env = {"PATH": f"{fakes}:/usr/bin:/bin", **defaults, **build_args}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    return done, called.read_text() if called.exists() else ""


def test_the_image_has_git_and_claude_code_unless_built_without_an_agent(tmp_path: Path) -> None:
    done, called = _install(tmp_path / "default")
    assert done.returncode == 0, done.stderr
    assert "install -y --no-install-recommends git ca-certificates" in called
    assert "npm install -g @anthropic-ai/claude-code@latest" in called and "claude --version" in called

    done, called = _install(tmp_path / "pinned", CLAUDE_CODE_VERSION="2.0.1")
    assert "npm install -g @anthropic-ai/claude-code@2.0.1" in called

    done, called = _install(tmp_path / "none", AGENT="none")
    assert done.returncode == 0 and " git " in called and "npm" not in called and "nodejs" not in called

    done, called = _install(tmp_path / "typo", AGENT="claude")
    assert done.returncode != 0 and "AGENT must be claude-code or none, not claude" in done.stderr and called == ""


def test_the_image_installs_pacer_at_the_locked_versions() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "requirements.lock" in text.split("COPY pyproject.toml", 1)[1].splitlines()[0]
    assert "pip install --no-cache-dir -c requirements.lock ." in text


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
SLACK_METHODS = {"chat_postMessage": "chat:write", "chat_postEphemeral": "chat:write", "views_publish": None}


def test_the_slack_manifest_asks_for_the_events_and_scopes_pacer_uses_and_no_more() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == set(SLACK_SCOPES)
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_home_opened", "app_mention", "message.channels", "message.groups", "message.im"}
    source = "\n".join(p.read_text() for folder in ("bot", "integrations") for p in (ROOT / folder).rglob("*.py"))
    called = set(re.findall(r"\.((?:admin|apps|auth|bookmarks|chat|conversations|files|pins|reactions|team|usergroups|users|views)_[A-Za-z]+)\(",
                            source))
    assert called <= set(SLACK_METHODS), "a new Web API method: add the scope it needs to deploy/slack-manifest.yaml and here"
    assert {scope for scope in SLACK_METHODS.values() if scope} <= set(SLACK_SCOPES)
