"""What a newcomer meets first: the README's opening, the licence, install hints that name
packages which exist (the `pacer` on the package index is someone else's project), and a lock file
that pins what pyproject asks for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bot.simulate.plot import require_matplotlib
from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text()


def test_the_readme_keeps_its_two_commands_and_says_what_they_need() -> None:
    block = README.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].startswith("python3 -m pip install . && pacer serve ")
    assert block[1].startswith(
        'python3 -m pip install -e ".[dev]" && python3 -m pytest '
    )  # .ci/run calls this verbatim
    opening = README.split("```sh\n", 1)[0]
    assert "Python 3.11" in opening and "python3 -m venv .venv" in opening


def test_the_licence_is_the_one_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "the Pacer authors" in text
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def test_no_hint_installs_pacer_from_the_package_index() -> None:
    paths = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "bot").rglob("*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in paths if re.search(r"pacer\[plot\]", p.read_text())]
    assert offenders == []


def test_without_matplotlib_the_plot_says_to_install_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    missing = require_matplotlib()
    assert missing is not None and "pip install matplotlib" in missing and "-e '.[plot]'" in missing


def _locked() -> dict[str, str]:
    """requirements.lock as {canonical name: version}; a line may end in an environment marker."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, version = line.split(";")[0].strip().partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_a_version_pyproject_allows_for_every_dependency_and_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        Requirement(r)
        for r in [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    ]
    pins = _locked()
    unpinned = [str(r) for r in wanted if canonicalize_name(r.name) not in pins]
    outside = [
        f"{r} (locked {pins[canonicalize_name(r.name)]})"
        for r in wanted
        if canonicalize_name(r.name) in pins
        and not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert unpinned == [] and outside == [], "regenerate requirements.lock as the README says"


def test_ci_installs_from_the_lock() -> None:
    assert 'pip install -q -c requirements.lock -e ".[dev]"' in (ROOT / ".ci" / "run").read_text()


def test_the_readme_lists_every_pacer_command_as_its_usage_says() -> None:
    """The README's command table is the grammar's own usage lines, so neither drifts."""
    from bot.commands.grammar import USAGE

    table = README.split("| `/pacer` command |\n|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table == ["| `" + usage.replace("|", "\\|") + "` |" for usage in USAGE.values()]


def test_without_postgresql_the_run_ends_saying_how_many_tests_skipped_and_why() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"PACER_TEST_DATABASE_URL", "PACER_REQUIRE_POSTGRES"}}
    done = subprocess.run(
        # One process: the summary line is the same, without two workers' start-up.
        [sys.executable, "-m", "pytest", "tests/system/test_deploy.py", "-k", "job_table", "-n", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
    assert (
        "1 test skipped: PostgreSQL not configured (set PACER_TEST_DATABASE_URL). Run them as the README's PostgreSQL "
        "section says"
        in done.stdout
    )
