"""A listening socket for PACER_HOST: the IPv6 wildcard `::` takes both stacks.

asyncio (so uvicorn) sets IPV6_V6ONLY on every IPv6 socket it binds, so `::` there answers IPv6
alone: on Fly, its private network (6PN) would reach the server and its proxy, which comes over
the machine's private IPv4 address, would not; `0.0.0.0` is the other way round. For `::` Pacer
binds the socket itself with IPV6_V6ONLY off and hands it over. Any other host is bound as given.
"""

from __future__ import annotations

import socket

WILDCARD_V6 = "::"


def both_stacks(host: str) -> bool:
    """Whether a bind on `host` must take IPv4 and IPv6 at once."""
    return host.strip("[]") == WILDCARD_V6


def dual_stack_socket(port: int) -> socket.socket:
    """A TCP socket bound on every address of both stacks at `port`, not yet listening. OSError
    when it cannot be bound (the port taken, or no IPv6 on this machine)."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((WILDCARD_V6, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
