"""fly.toml against what the code listens on: the worker group has a check, at the port `pacer
worker` answers GET /healthz on, and both process groups bind an address that Fly's proxy (over
the machine's private IPv4 address) and its private network (6PN, IPv6 only) both reach.
Real processes with fly.toml's [env]: `pacer serve` on SQLite, `pacer worker` on PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from bot.config.settings import load
from tests.support.cluster import scratch_database, until
from tests.support.paths import ROOT

FLY = tomllib.loads((ROOT / "fly.toml").read_text())
LOOPBACKS = ("127.0.0.1", "[::1]")  # what 0.0.0.0 answers on, and what it does not


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _ipv6(), reason="this machine has no IPv6 loopback")


def test_fly_checks_each_process_group_where_it_listens() -> None:
    settings = load(FLY["env"], toml_path=None)  # what every Fly machine's process reads
    assert FLY["processes"] == {"app": "pacer serve", "worker": "pacer worker"}
    [worker] = [check for check in FLY.get("checks", {}).values() if check.get("processes") == ["worker"]]
    assert (worker["type"], worker["method"], worker["path"]) == ("http", "GET", "/healthz")
    assert settings.worker_port is not None and worker["port"] == settings.worker_port
    assert FLY["http_service"]["processes"] == ["app"] and FLY["http_service"]["internal_port"] == settings.port
    assert [check["path"] for check in FLY["http_service"]["checks"]] == ["/healthz"]
    assert [m["port"] for m in FLY["metrics"]] == [settings.port]
    # The IPv6 wildcard (both stacks): 0.0.0.0 is IPv4 only, and 6PN is IPv6 only.
    assert settings.host == "::"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_", "FLY_"))}
    env.pop("DATABASE_URL", None)
    return {**env, "PYTHONPATH": str(ROOT), **FLY["env"], "PACER_DRAIN_SECONDS": "1", **extra}


def _dual_stack_port() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> dict[str, int | str]:
    """GET /healthz at each loopback: the status, or the error that came instead."""
    out: dict[str, int | str] = {}
    for host in LOOPBACKS:
        try:
            out[host] = httpx.get(f"http://{host}:{port}/healthz", timeout=2).status_code
        except httpx.HTTPError as exc:
            out[host] = type(exc).__name__
    return out


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start(command: str, tmp: Path, env: dict[str, str], running: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", command], cwd=tmp, env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=(tmp / f"{command}.log").open("w"))
    running.append(proc)
    return proc


@needs_ipv6
def test_the_app_bound_as_on_fly_answers_over_ipv4_and_ipv6(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    port = _dual_stack_port()
    env = _env(DATABASE_URL=f"sqlite:///{tmp_path}/pacer.db", PACER_PORT=str(port), PACER_TURN_QUEUE="local")
    serve = _start("serve", tmp_path, env, running)
    want = dict.fromkeys(LOOPBACKS, 200)
    assert until(lambda: _answers(port) == want or serve.poll() is not None, 60), _answers(port)
    assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]


@needs_ipv6
def test_a_worker_bound_as_on_fly_answers_its_check_over_ipv4_and_ipv6(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    port = _dual_stack_port()
    with scratch_database("pacer_flyworker") as url:
        env = _env(DATABASE_URL=url, PACER_WORKER_PORT=str(port))
        made = subprocess.run([sys.executable, "-m", "bot.cli", "migrate"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        worker = _start("worker", tmp_path, env, running)
        want = dict.fromkeys(LOOPBACKS, 200)
        assert until(lambda: _answers(port) == want or worker.poll() is not None, 60), (
            _answers(port), (tmp_path / "worker.log").read_text()[-3000:])
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json() == {"ok": True, "role": "worker"}
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).status_code == 404
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()[-3000:]


def test_a_health_port_already_taken_is_one_line_naming_it(engine: Engine) -> None:
    from bot.serve import worker_health
    from scheduler.errors import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with pytest.raises(ConfigError) as refused:
            worker_health.start("127.0.0.1", port, engine)
    assert str(refused.value).startswith(f'PACER_HOST="127.0.0.1" PACER_WORKER_PORT={port}: `pacer worker` cannot')
    assert "\n" not in str(refused.value)
