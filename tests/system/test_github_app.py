"""`pacer github-app`, the manifest flow Probot users know: the real command serves its form on
loopback, the test plays the browser and GitHub's redirect, and GitHub's one API endpoint (the
code's conversion) is a mock on loopback (GITHUB_API_URL). What it writes is read back by Pacer's
own settings."""

from __future__ import annotations

import html
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from bot.config.settings import load
from bot.github.app_manifest import DESCRIPTION, EVENTS, PERMISSIONS
from tests.support.github_app_flow import APP, PEM, come_back, local_url, mock_github, read_form, register
from tests.support.paths import ROOT

URL = "https://pacer.example.com"


def _start(tmp: Path, api: str, *args: str, **extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "GITHUB_", "SLACK_"))}
    env.pop("DATABASE_URL", None)
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "github-app", *args], cwd=tmp, text=True,
                            env={**env, "PYTHONPATH": str(ROOT), "GITHUB_API_URL": api, **extra},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_form_posts_the_manifest_and_the_code_becomes_the_apps_settings(tmp_path: Path) -> None:
    (tmp_path / "pacer.toml").write_text('# mine\n[settings]\nPACER_PORT = 9000\n\n[roster]\nU1 = "operator"\n')
    with mock_github() as github:
        proc = _start(tmp_path, github.url, "--url", URL + "/")
        action, manifest, answer = register(proc)
        code, out, err = _finish(proc)
    assert code == 0, err
    local = manifest["redirect_url"].rsplit("/", 1)[0]
    assert re.fullmatch(r"https://github\.com/settings/apps/new\?state=[\w-]{16,}", action)
    assert manifest == {
        "name": "Pacer", "url": URL, "description": manifest["description"], "public": False,
        "hook_attributes": {"url": f"{URL}/github/webhook", "active": True},
        "redirect_url": f"{local}/redirect",
        "default_permissions": PERMISSIONS, "default_events": EVENTS,
    }
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", local)
    assert answer.status_code == 200 and 'Registered the GitHub App "Pacer (acme)"' in answer.text
    assert [(m, p) for m, p, _ in github.requests] == [("POST", "/app-manifests/good/conversions")]
    assert github.requests[0][2]["Accept"] == "application/vnd.github+json"
    key, config = tmp_path / "pacer-github-app.pem", tmp_path / "pacer.toml"
    assert key.read_text() == PEM and _mode(key) == 0o600 and _mode(config) == 0o600
    written = tomllib.loads(config.read_text())
    assert written["roster"] == {"U1": "operator"} and config.read_text().startswith("# mine\n[settings]\n")
    assert written["settings"] == {
        "GITHUB_APP_ID": "424242", "GITHUB_APP_PRIVATE_KEY_FILE": str(key),
        "GITHUB_WEBHOOK_SECRET": "whsec-from-github", "GITHUB_BOT_LOGIN": "pacer-acme[bot]", "PACER_PORT": 9000,
    }
    settings = load({}, toml_path=config)  # what `pacer serve` reads from it
    assert (settings.github_app_id, settings.github_app_key) == ("424242", PEM)
    assert (settings.github_webhook_secret, settings.github_bot_login) == ("whsec-from-github", "pacer-acme[bot]")
    assert out.splitlines()[-3].startswith('Registered the GitHub App "Pacer (acme)" (id 424242)')
    assert f"to {config} [settings] (mode 0600)" in out and "/apps/pacer-acme/installations/new" in out


def test_an_organizations_app_posts_to_the_organizations_form(tmp_path: Path) -> None:
    with mock_github() as github:
        proc = _start(tmp_path, github.url, "--url", URL, "--org", "acme", "--name", "Pacer acme")
        action, manifest, _ = register(proc)
        assert _finish(proc)[0] == 0
    assert action.startswith("https://github.com/organizations/acme/settings/apps/new?state=")
    assert manifest["name"] == "Pacer acme"


def test_a_config_named_by_pacer_config_is_made_with_the_key_beside_it(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    with mock_github() as github:
        proc = _start(tmp_path, github.url, "--url", URL, PACER_CONFIG="etc/pacer.toml")
        register(proc)
        code, _, err = _finish(proc)
    assert code == 0, err
    config, key = tmp_path / "etc" / "pacer.toml", tmp_path / "etc" / "pacer-github-app.pem"
    assert load({}, toml_path=config).github_app_key == PEM == key.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["etc"]


def test_a_redirect_without_a_code_or_with_another_state_is_refused_and_waited_past(tmp_path: Path) -> None:
    with mock_github() as github:
        proc = _start(tmp_path, github.url, "--url", URL)
        local = local_url(proc)
        action, _ = read_form(local)
        state = action.split("state=", 1)[1]
        no_code = come_back(local, state=state)
        assert no_code.status_code == 400 and "without a code" in no_code.text and "Nothing was written" in no_code.text
        other = come_back(local, code="good", state="not-this-run")
        assert other.status_code == 400 and "state is not the one this run sent" in other.text
        assert sorted(p.name for p in tmp_path.iterdir()) == [] and github.requests == []
        assert come_back(local, code="good", state=state).status_code == 200  # still waiting for the real one
        assert _finish(proc)[0] == 0


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((404, {"message": "Not Found"}), "GitHub refused the code (404: Not Found)"),
        ((422, {"message": "Validation Failed"}), "GitHub refused the code (422: Validation Failed)"),
        ((201, {**APP, "pem": None}), "GitHub's answer lacks pem"),
    ],
)
def test_an_error_answer_ends_the_run_and_writes_nothing(tmp_path: Path, answer: tuple[int, object], said: str) -> None:
    before = "[settings]\nPACER_PORT = 9000\n"
    (tmp_path / "pacer.toml").write_text(before)
    with mock_github({"expired": answer}) as github:
        proc = _start(tmp_path, github.url, "--url", URL)
        _, _, page = register(proc, code="expired")
        code, _, err = _finish(proc)
    assert page.status_code == 502 and said in html.unescape(page.text)
    assert code == 1 and err.startswith(f"pacer github-app: nothing was written: {said}") and err.count("\n") == 1
    assert (tmp_path / "pacer.toml").read_text() == before and not (tmp_path / "pacer-github-app.pem").exists()


def test_an_unreachable_github_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with mock_github() as github:
        dead = github.url
    proc = _start(tmp_path, dead, "--url", URL)
    _, _, page = register(proc)
    code, _, err = _finish(proc)
    assert page.status_code == 502 and code == 1 and "could not reach GitHub at" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("setup", "args", "said"),
    [
        ('[settings]\nGITHUB_APP_ID = "7"\n', [], "already sets GITHUB_APP_ID: an App is configured there"),
        ("", ["--url", "pacer.example.com"], '--url "pacer.example.com": give Pacer\'s public URL'),
        ("", ["--org", "no such/org"], '--org "no such/org": not an organization\'s login'),
        ("key", [], "pacer-github-app.pem exists: a private key is never written over"),
    ],
)
def test_what_would_stop_the_writing_is_refused_before_anything_is_served(
    tmp_path: Path, setup: str, args: list[str], said: str
) -> None:
    if setup == "key":
        (tmp_path / "pacer-github-app.pem").write_text("mine")
    elif setup:
        (tmp_path / "pacer.toml").write_text(setup)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    proc = _start(tmp_path, "http://127.0.0.1:9/", *(["--url", URL] if "--url" not in args else []), *args)
    code, out, err = _finish(proc)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_the_hand_made_manifest_asks_for_what_the_flow_does() -> None:
    by_hand = yaml.safe_load((ROOT / "deploy" / "github-app.yml").read_text())
    assert by_hand["default_permissions"] == PERMISSIONS and by_hand["default_events"] == EVENTS
    assert (by_hand["description"], by_hand["public"]) == (DESCRIPTION, False)


def test_the_readmes_github_app_step_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    [line] = [ln.split("  #")[0].strip() for ln in readme.splitlines() if ln.strip().startswith("pacer github-app")]
    with mock_github() as github:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "GITHUB_", "SLACK_"))}
        proc = subprocess.Popen(["bash", "-c", line.replace("pacer ", f"{sys.executable} -m bot.cli ", 1)],
                                cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**env, "PYTHONPATH": str(ROOT), "GITHUB_API_URL": github.url})
        register(proc)
        assert _finish(proc)[0] == 0
    assert load({}, toml_path=tmp_path / "pacer.toml").github_app_id == str(APP["id"])


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "GITHUB_APP_PRIVATE_KEY_FILE=\"{path}\": cannot read it (No such file or directory)"),
     ("not a key", "GITHUB_APP_PRIVATE_KEY_FILE=\"{path}\": it holds no PEM private key")],
)
def test_a_key_file_that_holds_no_key_is_refused_naming_it(tmp_path: Path, content: str | None, said: str) -> None:
    from scheduler.errors import ConfigError

    path = tmp_path / "key.pem"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        load({"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY_FILE": str(path)}, toml_path=None)
    assert said.format(path=path) in str(refused.value)
