"""GitHub's side of `pacer github-app`, on loopback: a mock of the one API endpoint the flow calls
(POST /app-manifests/{code}/conversions), and a browser that reads the command's page and comes
back with GitHub's redirect. The command itself runs for real, as a process."""

from __future__ import annotations

import html
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAtest\n-----END RSA PRIVATE KEY-----\n"
APP = {
    "id": 424242,
    "slug": "pacer-acme",
    "name": "Pacer (acme)",
    "html_url": "https://github.com/apps/pacer-acme",
    "owner": {"login": "acme"},
    "client_id": "Iv1.abc",
    "client_secret": "client-secret",
    "webhook_secret": "whsec-from-github",
    "pem": PEM,
}


@dataclass
class MockGithub:
    url: str
    answers: dict[str, tuple[int, Any]]  # by code: the status and the JSON body
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


@contextmanager
def mock_github(answers: dict[str, tuple[int, Any]] | None = None) -> Iterator[MockGithub]:
    """GitHub's API on loopback, answering each code's conversion as `answers` says (default: the
    code `good` converts to APP; any other is GitHub's 404)."""
    table = answers if answers is not None else {"good": (201, APP)}
    mock = MockGithub(url="", answers=table)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            mock.requests.append(("POST", self.path, dict(self.headers)))
            found = re.fullmatch(r"/app-manifests/([^/]+)/conversions", self.path)
            status, body = (table.get(found.group(1), (404, {"message": "Not Found"})) if found
                            else (404, {"message": "Not Found"}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    mock.url = f"http://127.0.0.1:{server.server_address[1]}/"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield mock
    finally:
        server.shutdown()
        server.server_close()


def local_url(proc: subprocess.Popen[str]) -> str:
    """The address the command says to open (its first line)."""
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"Open (http://127\.0\.0\.1:\d+)/ ", first)
    assert found, first + (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
    return found.group(1)


def read_form(local: str) -> tuple[str, dict[str, Any]]:
    """What the page's form posts: its action, and the manifest it carries."""
    page = httpx.get(f"{local}/", timeout=10)
    assert page.status_code == 200, page.text
    action = re.search(r'<form id="register" action="([^"]+)" method="post">', page.text)
    value = re.search(r"<input type=\"hidden\" name=\"manifest\" value='([^']*)'>", page.text)
    assert action and value, page.text
    return html.unescape(action.group(1)), json.loads(html.unescape(value.group(1)))


def come_back(local: str, **query: str) -> httpx.Response:
    """The browser arriving at the redirect_url, as GitHub sends it."""
    return httpx.get(f"{local}/redirect", params=query, timeout=30)


def register(proc: subprocess.Popen[str], code: str = "good") -> tuple[str, dict[str, Any], httpx.Response]:
    """Play the person and GitHub: read the page, and come back with `code` and the form's state."""
    local = local_url(proc)
    action, manifest = read_form(local)
    state = re.search(r"[?&]state=([^&]+)", action)
    assert state, action
    return action, manifest, come_back(local, code=code, state=state.group(1))
