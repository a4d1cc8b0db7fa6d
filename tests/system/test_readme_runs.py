"""The README followed line by line from a fresh clone: every shell block marked
`<!-- runnable -->` is run, a line at a time, in a copy of the tracked files with a virtual
environment made as the README's opening says.

Two things differ from a machine with only Python, each because the test cannot do otherwise:
the new environment reads the packages Pacer depends on from the running interpreter's site
(a `.pth` line), so no dependency is downloaded; and `python3 -m pytest` is run with
`--collect-only --assert=plain`, since the suite cannot run itself (`.ci/run` runs that line
verbatim) and a collection that runs no test needs no rewritten asserts (half its time). A line
that starts `pacer serve` passes once `/healthz` answers, and is then stopped; one that ends in
`&` keeps running for the lines after it in its block (a console speaking to it), and is stopped
at the block's end. A `pacer github-app` line meets GitHub's side offline: a mock of the code's
conversion on loopback (GITHUB_API_URL), and a browser that reads its page and comes back with
GitHub's redirect (`tests.support.github_app_flow`); it passes once it has written the App's
settings."""

from __future__ import annotations

import os
import re
import signal
import site
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from tests.support.github_app_flow import mock_github, register
from tests.support.paths import ROOT

MARK = "<!-- runnable -->"
SERVE_SECONDS = 120  # the install before it included


def runnable_blocks(readme: str) -> list[list[str]]:
    """The command lines of each ```sh block right after the marker, comments dropped."""
    blocks = re.findall(re.escape(MARK) + r"\n[ \t]*```sh\n(.*?)```", readme, flags=re.S)  # in a list item too
    return [[line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()] for block in blocks]


def _clone(into: Path) -> None:
    """The files a clone would have: tracked ones, and new ones not yet ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(source.read_bytes())


def _environment(clone: Path) -> dict[str, str]:
    """`python3 -m venv .venv && . .venv/bin/activate`, with the dependencies borrowed."""
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=clone, check=True, timeout=120)
    python = clone / ".venv" / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    borrowed = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    (Path(purelib) / "_borrowed_dependencies.pth").write_text("\n".join(dict.fromkeys(borrowed)) + "\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PACER_", "SLACK_", "GITHUB_", "PYTHON")) and k not in {"DATABASE_URL", "VIRTUAL_ENV"}}
    return env | {
        "VIRTUAL_ENV": str(clone / ".venv"),
        "PATH": f"{clone / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
    }


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(line: str, clone: Path, env: dict[str, str]) -> subprocess.Popen[str] | None:
    """Start a `pacer serve` line and wait for /healthz; stop it then, or, for a line that ends in
    `&` (a server the next lines speak to), return it running, to be stopped after its block."""
    background = line.endswith("&")
    port = _port()
    proc = subprocess.Popen(["bash", "-c", line.rstrip("& ")], cwd=clone, env=env | {"PACER_PORT": str(port)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + SERVE_SECONDS
    answered = False
    try:
        while time.monotonic() < deadline and proc.poll() is None and not answered:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.5)
    finally:
        if not (background and answered):
            output = _stop(proc)
    if background and answered:
        return proc
    assert answered, f"{line!r} never answered /healthz:\n{output}"
    return None


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]


def _github_app(line: str, clone: Path, env: dict[str, str]) -> None:
    """Run a `pacer github-app` line against GitHub's side played on loopback."""
    with mock_github() as github:
        proc = subprocess.Popen(["bash", "-c", line], cwd=clone, env=env | {"GITHUB_API_URL": github.url},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, _, answer = register(proc)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert answer.status_code == 200 and proc.returncode == 0, f"{line!r}:\n{answer.text}\n{out}\n{err}"
    assert "GITHUB_APP_ID" in (clone / "pacer.toml").read_text()


def _run(line: str, clone: Path, env: dict[str, str]) -> str:
    if re.search(r"python3 -m pytest\b", line):
        line = re.sub(r"(python3 -m pytest)\b", r"\1 --collect-only --assert=plain", line)
    done = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{line!r} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_readme_marks_its_fresh_clone_commands_runnable() -> None:
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    assert blocks and blocks[0][0].startswith("python3 -m pip install . && pacer serve")
    assert any("python3 -m pytest" in line for block in blocks for line in block)
    assert any(line.startswith("pacer github-app --url ") for block in blocks for line in block)


@pytest.mark.long
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="a fresh clone is copied from the git checkout")
def test_the_readmes_runnable_blocks_work_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "pacer"
    clone.mkdir()
    _clone(clone)
    env = _environment(clone)
    for block in runnable_blocks((clone / "README.md").read_text()):
        running: list[subprocess.Popen[str]] = []
        try:
            for line in block:
                if re.search(r"\bpacer serve\b", line):
                    running.extend(p for p in [_serve(line, clone, env)] if p is not None)
                elif re.match(r"pacer github-app\b", line):
                    _github_app(line, clone, env)
                else:
                    out = _run(line, clone, env)
                    if "--collect-only" in line or "python3 -m pytest" in line:
                        collected = re.search(r"(\d+) tests? collected", out)
                        assert collected and int(collected.group(1)) > 1000, out[-2000:]
                    if re.search(r"\bpacer console\b", line):
                        assert out.startswith("Pacer console as") and "error:" not in out, out
        finally:
            for proc in running:
                _stop(proc)
    installed = subprocess.run([clone / ".venv" / "bin" / "python", "-c", "import bot; print(bot.__file__)"],
                               cwd=clone, capture_output=True, text=True, check=True, env=env).stdout
    assert installed.startswith(str(clone)), "Pacer ran from this checkout, not from the clone's install"
