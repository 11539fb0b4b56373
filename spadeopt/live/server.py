"""A read-only HTTP server over a running job's state: ``/metrics`` (Prometheus text),
``/api/state`` (the state dict as JSON), ``/api/plan`` (the plan picture's layout) and
``/`` (a web page drawing both, from ``page/``). Only GET and HEAD; anything else 405.

Bound to loopback by default, where every client is this machine's and needs no token.
Bound to any other address, ``serve`` requires a token (one is generated when none is
given) and every request from a peer that is not loopback must carry it:
``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` on the page's URL (the page passes
it on to its own requests). Anything else gets 401. docs/decisions/062-live-metrics-presentation.md.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import secrets
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
              "/index.html": ("index.html", "text/html; charset=utf-8"),
              "/app.js": ("app.js", "text/javascript; charset=utf-8"),
              "/style.css": ("style.css", "text/css; charset=utf-8")}
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the text format every Prometheus reads
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")  # the page fetches nothing elsewhere


def is_loopback(host: str) -> bool:
    """Is ``host`` (an address or a name) loopback only? An IPv4-mapped IPv6 address
    counts as its IPv4 address; a name counts when everything it resolves to is loopback."""
    try:
        addr = ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        if host == "localhost":
            return True
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return bool(infos) and all(is_loopback(str(i[4][0])) for i in infos)
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def _page(name: str) -> bytes:
    return resources.files("spadeopt.live").joinpath("page", name).read_bytes()


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a request in flight never keeps the driver from ending
    allow_reuse_address = True

    def server_bind(self) -> None:
        import socketserver

        socketserver.TCPServer.server_bind(self)  # not HTTPServer's: its getfqdn() may wait on reverse DNS
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class LiveServer:
    """A daemon-thread HTTP server; ``url`` is where it listens, ``close()`` stops it."""

    def __init__(self, httpd: ThreadingHTTPServer, host: str, token: str | None,
                 state: Callable[[], dict] | None = None) -> None:
        self._httpd = httpd
        self.token = token
        self.state = state  # the job state it serves (``run --adaptive`` watches the sources' lag in it)
        port = httpd.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="spadeopt-live-http", daemon=True)
        self._thread.start()

    @property
    def page_url(self) -> str:
        """The page's URL for a browser on another machine (with the token, when there is one)."""
        return f"{self.url}?token={quote(self.token)}" if self.token else self.url

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(state: Callable[[], dict], plan: dict, *, host: str = "127.0.0.1", port: int = 0,
          token: str | None = None) -> LiveServer:
    """Serve ``state()`` (called at each request) and ``plan`` (the plan layout JSON,
    ``spadeopt.plan.picture.plan_layout``) on ``host:port`` (port 0: a free one)."""
    if not is_loopback(host) and not token:
        token = secrets.token_urlsafe(24)
    handler = type("Handler", (_Handler,), {"state": staticmethod(state), "plan": plan, "token": token})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("Server", (_Server,), {"address_family": family})
    httpd = server_class((host.strip("[]"), port), handler)
    return LiveServer(httpd, host, token, state)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON has no such numbers; browsers refuse them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _json(value: Any) -> bytes:
    return json.dumps(_finite(value), default=str).encode()


class _Handler(BaseHTTPRequestHandler):
    state: Callable[[], dict]
    plan: dict
    token: str | None
    server_version = "spadeopt-live"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def __getattr__(self, name: str):
        if name.startswith("do_"):  # POST, PUT, DELETE, ... any other method: read-only
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._send(405, b"read-only: GET or HEAD\n", "text/plain; charset=utf-8", body=True, extra={"Allow": "GET, HEAD"})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # the driver's terminal is the user's: no access log on it

    def _authorised(self, query: dict[str, list[str]]) -> bool:
        if self.token is None or is_loopback(self.client_address[0]):
            return True
        given = self.headers.get("Authorization", "")
        candidates = [given[7:].strip()] if given.startswith("Bearer ") else []
        candidates += query.get("token", [])[:1]
        return any(hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates)

    def _answer(self, body: bool) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if not self._authorised(query):
            self._send(401, b"a token is needed: Authorization: Bearer TOKEN, or ?token=TOKEN\n",
                       "text/plain; charset=utf-8", body, extra={"WWW-Authenticate": 'Bearer realm="spadeopt"'})
            return
        try:
            found = self._route(parts.path, "token" in query)
        except Exception as exc:  # the state provider failed: say so, keep serving
            self._send(500, f"state unavailable: {type(exc).__name__}: {exc}\n".encode(),
                       "text/plain; charset=utf-8", body)
            return
        if found is None:
            self._send(404, b"not found: /, /metrics, /api/state, /api/plan\n", "text/plain; charset=utf-8", body)
        else:
            self._send(200, found[0], found[1], body)

    def _route(self, path: str, token_in_query: bool) -> tuple[bytes, str] | None:
        if path == "/metrics":
            from prometheus_client import generate_latest

            from spadeopt.live.prometheus import registry

            return generate_latest(registry(self.state)), METRICS_TYPE
        if path == "/api/state":
            return _json(self.state()), "application/json"
        if path == "/api/plan":
            return _json(self.plan), "application/json"
        if path in PAGE_FILES:
            name, ctype = PAGE_FILES[path]
            data = _page(name)
            if name == "index.html" and token_in_query and self.token:
                # the page's own files come back with the token too (the browser does not carry
                # the page's query over); only ever the server's token, checked above
                t = quote(self.token).encode()
                data = data.replace(b'href="style.css"', b'href="style.css?token=' + t + b'"')
                data = data.replace(b'src="app.js"', b'src="app.js?token=' + t + b'"')
            return data, ctype
        return None

    def _send(self, code: int, data: bytes, ctype: str, body: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away
