"""`pacer github-app`: register Pacer's GitHub App from its manifest, as Probot's setup does.

    pacer github-app --url https://pacer.example.com [--org my-org]

It serves a page on loopback with a form that posts the App's manifest (`bot.github.app_manifest`,
GitHub's JSON form) to GitHub's new-App page, with `redirect_url` back to this server. GitHub
sends the browser back with a one-time `code`; this exchanges it at
POST {GITHUB_API_URL}/app-manifests/{code}/conversions for the App's id, private key and webhook
secret, and writes them: the key to a file of its own (mode 0600), the id, the key's path, the
secret and the App's bot login into pacer.toml's [settings] (the file --config or PACER_CONFIG
names, else ./pacer.toml; mode 0600, as it then holds a secret). A redirect without a code, or
with a state this run did not make, is answered with why and waited past; an error answer from
GitHub ends the run. Either way nothing is written unless the exchange gave everything.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx

from bot.config import toml_file
from bot.github.app_manifest import form_action, manifest
from scheduler.errors import ConfigError
from templates import error_text, render, render_html

WRITTEN = ["GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY_FILE", "GITHUB_WEBHOOK_SECRET", "GITHUB_BOT_LOGIN"]
ALREADY = ["GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE", "GITHUB_WEBHOOK_SECRET"]
NEEDED = ("id", "slug", "pem", "webhook_secret")  # what the conversion must answer
EXCHANGE_SECONDS = 30.0


@dataclass
class Flow:
    """One registration: what the form posts, where the answer goes, and how it ended."""

    config: Path
    key_file: Path
    api_url: str
    action: str
    manifest: dict[str, Any]
    state: str
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one redirect exchanged at a time
    result: dict[str, Any] | None = None
    error: str | None = None


def register(sub: Any) -> None:
    app = sub.add_parser(
        "github-app",
        help="register Pacer's GitHub App from its manifest and write its id, key and secret",
        description="Serve a page on loopback whose form registers Pacer's GitHub App from its manifest "
        "(GitHub's manifest flow, as Probot's setup), take the code GitHub redirects back with, exchange it "
        "for the App's id, private key and webhook secret, and write them: the key to --key-file (mode 0600), "
        "the rest to pacer.toml's [settings].",
    )
    app.add_argument("--url", required=True, metavar="PUBLIC_URL",
                     help="Pacer's public URL: GitHub sends webhooks to PUBLIC_URL/github/webhook")
    app.add_argument("--org", help="register the App under this organization (default: your own account)")
    app.add_argument("--name", default="Pacer", help="the App's name, unique on GitHub (default Pacer)")
    app.add_argument("--port", type=int, default=0, help="the local port to serve on (default: any free one)")
    app.add_argument("--key-file", metavar="FILE",
                     help="where to write the private key (default: pacer-github-app.pem beside pacer.toml)")
    app.add_argument("--github-url", default="https://github.com", metavar="URL",
                     help="GitHub's web address (a GitHub Enterprise Server's, with GITHUB_API_URL its API)")
    app.set_defaults(func=cmd_github_app)


def cmd_github_app(args: argparse.Namespace) -> int:
    from bot.config import settings as settings_mod

    config = Path(getattr(args, "config", None) or os.environ.get("PACER_CONFIG") or "pacer.toml").absolute()
    key_file = Path(args.key_file).absolute() if args.key_file else config.parent / "pacer-github-app.pem"
    _preflight(args, config, key_file)
    environ = {k: v for k, v in os.environ.items() if k != "PACER_CONFIG"}  # a config still to be made is no error
    settings = settings_mod.load(environ, toml_path=config if config.exists() else None)
    state = secrets.token_urlsafe(16)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    server.daemon_threads = True
    local = f"http://127.0.0.1:{server.server_address[1]}"
    server.flow = Flow(  # type: ignore[attr-defined]
        config=config, key_file=key_file, api_url=settings.github_api_url, state=state,
        action=form_action(args.github_url, args.org, state),
        manifest=manifest(name=args.name, public_url=args.url, redirect_url=f"{local}/redirect"),
    )
    flow: Flow = server.flow  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="pacer-github-app", daemon=True).start()
    print(render("text/github_app_open.j2", local=local, org=args.org, action=flow.action), flush=True)
    try:
        flow.done.wait()
    finally:
        server.shutdown()
        server.server_close()
    if flow.error is not None:
        print(error_text("github_app/refused", problem=flow.error), file=sys.stderr)
        return 1
    assert flow.result is not None
    print(render("text/github_app_done.j2", app=flow.result, config=config, key_file=key_file, names=WRITTEN))
    return 0


def _preflight(args: argparse.Namespace, config: Path, key_file: Path) -> None:
    """Everything that would stop the writing, checked before anything is registered."""
    if not re.match(r"^https?://[^/\s]+", args.url):
        raise ConfigError(error_text("github_app/bad_url", url=args.url))
    if args.org is not None and not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})", args.org):
        raise ConfigError(error_text("github_app/bad_org", org=args.org))
    taken = toml_file.already_set(config, ALREADY)
    if taken:
        raise ConfigError(error_text("github_app/already_set", config=config, names=taken))
    if key_file.exists():
        raise ConfigError(error_text("github_app/key_exists", path=key_file))
    for folder in {config.parent, key_file.parent}:
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise ConfigError(error_text("github_app/unwritable", path=folder))


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        flow: Flow = self.server.flow  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/":
            self._page(200, "page/github_app.html.j2", action=flow.action, manifest=flow.manifest)
        elif url.path != "/redirect":
            self._page(404, "page/github_app_result.html.j2", problem=error_text("github_app/not_here", path=url.path))
        else:
            with flow.lock:
                self._redirect(flow, query)

    def _redirect(self, flow: Flow, query: dict[str, str]) -> None:
        if flow.done.is_set():
            self._page(409, "page/github_app_result.html.j2", problem=error_text("github_app/finished"))
        elif query.get("state") != flow.state:
            self._page(400, "page/github_app_result.html.j2", problem=error_text("github_app/wrong_state"))
        elif not query.get("code"):
            self._page(400, "page/github_app_result.html.j2", problem=error_text("github_app/no_code"))
        else:
            try:
                app = exchange(flow.api_url, query["code"])
                write(flow, app)
            except ConfigError as exc:
                flow.error = str(exc)
                self._page(502, "page/github_app_result.html.j2", problem=flow.error)
            else:
                flow.result = app
                self._page(200, "page/github_app_result.html.j2", problem=None, app=app,
                           config=flow.config, key_file=flow.key_file, names=WRITTEN)
            flow.done.set()

    def _page(self, status: int, template: str, **context: Any) -> None:
        body = render_html(template, **context).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        pass


def exchange(api_url: str, code: str) -> dict[str, Any]:
    """POST the code to GitHub's conversion endpoint; the App it answers, or a ConfigError saying why not."""
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    try:
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        answer = httpx.post(url, headers=headers, timeout=EXCHANGE_SECONDS)
    except httpx.HTTPError as exc:
        raise ConfigError(error_text("github_app/unreachable", url=url, reason=exc)) from None
    try:
        body = answer.json()
    except ValueError:
        body = None
    if answer.status_code != 201 or not isinstance(body, dict):
        message = body.get("message") if isinstance(body, dict) else answer.text[:200]
        raise ConfigError(error_text("github_app/answered", status=answer.status_code, message=message or ""))
    missing = [name for name in NEEDED if not body.get(name)]
    if missing:
        raise ConfigError(error_text("github_app/incomplete", missing=missing))
    return body


def write(flow: Flow, app: dict[str, Any]) -> None:
    """The key to its file (mode 0600, never over another), then the settings into the config;
    the key removed again when the config cannot take them."""
    try:
        handle = os.open(flow.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ConfigError(error_text("github_app/key_unwritten", path=flow.key_file, reason=exc.strerror)) from None
    with os.fdopen(handle, "w") as out:
        out.write(app["pem"])
    values = {"GITHUB_APP_ID": str(app["id"]), "GITHUB_APP_PRIVATE_KEY_FILE": str(flow.key_file),
              "GITHUB_WEBHOOK_SECRET": str(app["webhook_secret"]), "GITHUB_BOT_LOGIN": f"{app['slug']}[bot]"}
    try:
        toml_file.add_settings(flow.config, values)
    except BaseException:
        flow.key_file.unlink(missing_ok=True)
        raise
