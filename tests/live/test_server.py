"""The live server over real HTTP: its routes, read-only, and the token rule (a peer that
is not loopback needs the token; a loopback one does not), tested from a real
non-loopback address of this machine when it has one."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spadeopt.live.server import is_loopback, serve
from tests.live.states import Changing, full_state, plan
from tests.toolkit import netns


def _get(url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def server():
    states = Changing()
    with serve(states, plan()) as srv:
        srv.states = states
        yield srv


def test_routes(server):
    assert server.url.startswith("http://127.0.0.1:") and server.token is None
    code, headers, body = _get(server.url + "metrics")
    assert code == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    names = {s.name for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}
    assert {"spadeopt_pe_tuples_in_total", "spadeopt_latency_seconds_bucket", "spadeopt_job_info"} <= names
    code, headers, body = _get(server.url + "api/state")
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == server.states.served[-1]
    code, _, body = _get(server.url + "api/plan")
    assert code == 200 and json.loads(body) == plan()
    code, headers, body = _get(server.url)
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<script src="app.js"></script>' in body and b"https://" not in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    for asset, ctype in (("app.js", "text/javascript"), ("style.css", "text/css")):
        code, headers, body = _get(server.url + asset)
        assert code == 200 and headers["Content-Type"].startswith(ctype) and len(body) > 1000
        assert b"http://" not in body.replace(b"http://www.w3.org/2000/svg", b"") and b"https://" not in body
    assert _get(server.url + "nothing")[0] == 404
    code, headers, body = _get(server.url + "api/state", method="HEAD")
    assert code == 200 and body == b"" and int(headers["Content-Length"]) > 100


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_only_get_and_head(server, method):
    host, port = server.url[7:-1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, "/api/state", body=b"{}")
    resp = conn.getresponse()
    assert resp.status == 405 and resp.getheader("Allow") == "GET, HEAD"
    conn.close()


def test_a_failing_state_provider_is_a_500_and_the_server_goes_on():
    calls = []

    def state():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("driver not ready")
        return full_state() | {"now": float("nan")}

    with serve(state, plan()) as srv:
        code, _, body = _get(srv.url + "api/state")
        assert code == 500 and b"driver not ready" in body
        code, _, body = _get(srv.url + "api/state")
        assert code == 200 and json.loads(body)["now"] is None  # NaN is no JSON: null


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.0.2.2", "10.1.1.1", "::ffff:10.0.0.1"))


_PEER_GET = """
import base64, json, sys, urllib.error, urllib.request
url, headers, method = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
req = urllib.request.Request(url, headers=headers, method=method)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        code, hdrs, body = r.status, dict(r.headers), r.read()
except urllib.error.HTTPError as exc:
    code, hdrs, body = exc.code, dict(exc.headers), exc.read()
print(json.dumps([code, hdrs, base64.b64encode(body).decode()]))
"""


def peer_get(in_peer, url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    """``_get`` from the peer's network namespace (``tests.toolkit.netns``): its address is not loopback."""
    import base64
    import sys

    done = in_peer(sys.executable, "-c", _PEER_GET, url, json.dumps(headers or {}), method)
    assert done.returncode == 0, done.stderr
    code, hdrs, body = json.loads(done.stdout)
    return code, hdrs, base64.b64decode(body)


@pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))
def test_a_non_loopback_peer_needs_the_token():
    with netns.peer_namespace() as (ip, in_peer), serve(Changing(), plan(), host=ip) as srv:
        assert srv.token and len(srv.token) >= 24  # generated: not loopback, so one is required
        assert srv.url.startswith(f"http://{ip}:")
        for path in ("", "metrics", "api/state", "api/plan", "app.js"):
            code, headers, body = peer_get(in_peer, srv.url + path)
            assert code == 401 and "Bearer" in headers["WWW-Authenticate"], path
            assert b"spadeopt_" not in body and b"pe0" not in body
        assert peer_get(in_peer, srv.url + "api/state", {"Authorization": "Bearer wrong"})[0] == 401
        assert peer_get(in_peer, srv.url + "api/state?token=wrong")[0] == 401
        code, _, body = peer_get(in_peer, srv.url + "api/state", {"Authorization": f"Bearer {srv.token}"})
        assert code == 200 and json.loads(body)["app"] == "demo"
        assert peer_get(in_peer, srv.url + "metrics?token=" + srv.token)[0] == 200
        code, _, page = peer_get(in_peer, srv.page_url)
        assert code == 200 and f'src="app.js?token={srv.token}"'.encode() in page  # its files come with it
        assert peer_get(in_peer, srv.url + f"app.js?token={srv.token}")[0] == 200
        assert peer_get(in_peer, srv.url + "api/state", {"Authorization": f"Bearer {srv.token}"}, "POST")[0] == 405


@pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))
def test_a_given_token_and_a_wildcard_bind():
    with netns.peer_namespace() as (ip, in_peer), \
            serve(Changing(), plan(), host="0.0.0.0", token="s3cret-token-of-mine") as srv:
        port = srv.url.rsplit(":", 1)[1].strip("/")
        assert srv.token == "s3cret-token-of-mine"
        assert _get(f"http://127.0.0.1:{port}/api/state")[0] == 200  # a loopback peer needs none
        assert peer_get(in_peer, f"http://{ip}:{port}/api/state")[0] == 401
        assert peer_get(in_peer, f"http://{ip}:{port}/api/state",
                        {"Authorization": "Bearer s3cret-token-of-mine"})[0] == 200