"""Authenticated, encrypted links between PEs: ZeroMQ CURVE keys and a ZAP handler.

Key scheme (per run, nothing secret ever leaves the process that made it):

- each PE makes one CURVE *server* keypair for its PULL sockets and one CURVE *client*
  keypair per outgoing link (``zmq.curve_keypair``) when it starts;
- only the public keys travel: PE -> agent (stdout "bound" event) -> every node
  (``BarrierTaskContext.allGather``) -> the PEs (stdin "connect" command);
- a PE's ZAP handler admits, on each input port (its ZAP domain is the port ref), only
  the client keys of that port's upstream links and answers with the link id as the
  ZAP *User-Id*, so every message on that connection carries the authenticated link
  that sent it (``zmq.Frame.get("User-Id")``).

Everything else is refused and counted: a client with a CURVE key that is not one of
the port's links is refused by the ZAP handler; a peer that does not speak CURVE, or
speaks it with the wrong server key, fails the handshake, which the socket monitor
reports. Refusals are logged to the PE log (stderr) and returned in the PE's stats.

ZAP requests that arrive before the allow-lists are installed (a fast upstream PE may
connect before this PE has read its "connect" command) are held, not refused, until
they are installed: legitimate links are never refused by a start-up race.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter

import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
HANDSHAKE_FAILURES = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
ALLOW_WAIT_S = 120.0  # how long a ZAP request may wait for the allow-lists


def keypair() -> tuple[str, str]:
    """A fresh CURVE keypair as Z85 text: (public, secret)."""
    public, secret = zmq.curve_keypair()
    return public.decode("ascii"), secret.decode("ascii")


def make_server(sock: zmq.Socket, public: str, secret: str, domain: str) -> None:
    """Make ``sock`` a CURVE server authenticated by this PE's ZAP handler under ``domain``."""
    sock.curve_server = True
    sock.curve_publickey = public.encode("ascii")
    sock.curve_secretkey = secret.encode("ascii")
    sock.zap_domain = domain.encode()
    sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)  # never accept without asking the handler


def make_client(sock: zmq.Socket, public: str, secret: str, server_public: str) -> None:
    sock.curve_publickey = public.encode("ascii")
    sock.curve_secretkey = secret.encode("ascii")
    sock.curve_serverkey = server_public.encode("ascii")


class Guard:
    """One PE's ZAP handler and handshake-failure monitor (two daemon threads).

    ``allow(domain -> {client public key (Z85) -> link id})`` installs the allow-lists;
    ``refused`` counts refusals per domain (input port ref).
    """

    def __init__(self, ctx: zmq.Context, pe: str) -> None:
        self.ctx = ctx
        self.pe = pe
        self.refused: Counter[str] = Counter()
        self._allowed: dict[str, dict[bytes, str]] = {}
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._zap = ctx.socket(zmq.REP)
        self._zap.linger = 0
        self._zap.bind(ZAP_ENDPOINT)
        self._monitors: list[tuple[zmq.Socket, str]] = []
        self._threads = [threading.Thread(target=self._serve_zap, daemon=True, name="zap")]
        self._threads[0].start()

    def allow(self, allowed: dict[str, dict[str, str]]) -> None:
        self._allowed = {dom: {z85.decode(k.encode("ascii")): link for k, link in keys.items()}
                         for dom, keys in allowed.items()}
        self._ready.set()

    def watch(self, sock: zmq.Socket, domain: str) -> None:
        """Count handshake failures (peers without the run's CURVE keys) on ``sock``."""
        self._monitors.append((sock.get_monitor_socket(HANDSHAKE_FAILURES), domain))

    def start_monitor(self) -> None:
        if self._monitors:
            t = threading.Thread(target=self._serve_monitor, daemon=True, name="link-monitor")
            self._threads.append(t)
            t.start()

    def refusals(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self.refused.items()))

    def _refuse(self, domain: str, why: str) -> None:
        with self._lock:
            self.refused[domain] += 1
        print(f"spadeopt: PE {self.pe} refused a connection on input port {domain}: {why}",
              file=sys.stderr, flush=True)

    def _serve_zap(self) -> None:
        sock = self._zap
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                if not poller.poll(200):
                    continue
                frames = sock.recv_multipart()
                version, request_id, domain, address, _identity, mechanism = frames[:6]
                dom = domain.decode(errors="replace")
                status, text, user = b"400", b"not a link of this run", b""
                if version != b"1.0":
                    status, text = b"500", b"bad ZAP version"
                elif mechanism != b"CURVE" or len(frames) < 7:
                    self._refuse(dom, f"mechanism {mechanism.decode(errors='replace')} from "
                                      f"{address.decode(errors='replace') or 'ipc peer'}")
                else:
                    self._ready.wait(ALLOW_WAIT_S)
                    link = self._allowed.get(dom, {}).get(frames[6])
                    if link is not None:
                        status, text, user = b"200", b"OK", link.encode()
                    else:
                        key = z85.encode(frames[6]).decode("ascii")
                        self._refuse(dom, f"CURVE key {key} is not an upstream link of this port "
                                          f"(peer {address.decode(errors='replace') or 'ipc'})")
                sock.send_multipart([b"1.0", request_id, status, text, user, b""])
        except zmq.ContextTerminated:
            pass
        finally:
            sock.close(0)

    def _serve_monitor(self) -> None:
        poller = zmq.Poller()
        by_sock = {}
        for mon, dom in self._monitors:
            poller.register(mon, zmq.POLLIN)
            by_sock[mon] = dom
        try:
            while not self._stop.is_set():
                for mon, _ in poller.poll(200):
                    ev = parse_monitor_message(mon.recv_multipart())
                    if ev["event"] & HANDSHAKE_FAILURES:
                        reason = "authentication failed" if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH \
                            else "handshake failed (no or wrong CURVE credentials)"
                        if ev["event"] != zmq.EVENT_HANDSHAKE_FAILED_AUTH:  # ZAP refusals are counted there
                            self._refuse(by_sock[mon], f"{reason}, error {ev['value']} on "
                                                       f"{ev['endpoint'].decode(errors='replace')}")
        except zmq.ContextTerminated:
            pass
        finally:
            for mon in by_sock:
                mon.close(0)

    def close(self) -> None:
        self._stop.set()
        self._ready.set()
        for t in self._threads:
            t.join(2.0)
