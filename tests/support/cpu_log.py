"""Opt-in: PACER_TEST_CPU_LOG=path appends one JSON line a test to `path`: its node id, the xdist
worker, its wall time, the CPU time of the test process (user + system), and the CPU time of the
child processes it waited for (started servers, workers, consoles: RUSAGE_CHILDREN counts only
children that were waited for). Setup and teardown are counted in the test that ran them.
To find where the suite's time goes: rank the lines by CPU and by wall, and group them by file."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    path = os.environ.get("PACER_TEST_CPU_LOG")
    if not path:
        yield
        return
    wall, own, children = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    line = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        "wall": round(time.monotonic() - wall, 3),
        "cpu": round(_cpu(resource.RUSAGE_SELF) - own, 3),
        "children": round(_cpu(resource.RUSAGE_CHILDREN) - children, 3),
    }
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")
