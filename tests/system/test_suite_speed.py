"""The suite's own economies, each measured when it was made (tests/support/cpu_log.py says how),
still in force: a change to a library they lean on must not undo one in silence."""

from __future__ import annotations

import httpx


def test_every_default_httpx_client_shares_one_tls_context() -> None:
    """tests/conftest.py: 50 ms of CPU a client otherwise, for plain HTTP on loopback."""
    with httpx.Client() as one, httpx.Client(timeout=3) as two, httpx.Client(verify=False) as other:
        contexts = [client._transport._pool._ssl_context for client in (one, two, other)]  # type: ignore[attr-defined]
    assert contexts[0] is contexts[1]
    assert contexts[2] is not contexts[0] and not contexts[2].check_hostname  # another verification: its own
