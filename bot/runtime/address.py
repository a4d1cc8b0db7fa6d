"""Where a process on this machine reaches a `pacer serve` bound to a host and port."""

from __future__ import annotations


def reachable_url(host: str, port: int) -> str:
    """The base URL a process on this machine reaches the server at (a wildcard bind answers on loopback)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
