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
speaks it with the wrong server key, fails the handshake. The socket monitor reports
each failed handshake exactly once, whatever refused it, so refusals are counted
there (the ZAP handler only says which key it refused, for the log): a peer that
hangs up right after its ZAP refusal is one refusal, not two. The counts are exact
and returned in the PE's stats; the PE log (stderr) gets the first ``LOG_FIRST``
refusals one by one, then at most one line per ``LOG_EVERY_S`` with the count since
the last line, and a last one when the PE closes (``RefusalLog``): whoever can reach
a port cannot fill the disk.

A link admitted twice on a port had its connection dropped and re-established
(``Guard.dropped``): the receiving socket's ``MAXMSGSIZE`` makes ZeroMQ drop a
connection that sends an oversized frame, before allocating it, and the PE must not
go on as if the frames sent on it had arrived.

ZAP requests that arrive before the allow-lists are installed (a fast upstream PE may
connect before this PE has read its "connect" command) are held, not refused, until
they are installed: legitimate links are never refused by a start-up race.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TextIO

import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
HANDSHAKE_FAILURES = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
ALLOW_WAIT_S = 120.0  # how long a ZAP request may wait for the allow-lists
LOG_FIRST = 10  # refusals logged one by one, then...
LOG_EVERY_S = 60.0  # ...at most one summary line this often


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


def driver_server(kind: int, local: bool, max_msg: int | None = None) -> tuple[zmq.Socket, str, str]:
    """A CURVE server socket of the driver's (the rendezvous, the checkpoint coordinator,
    the live metrics) with a fresh keypair, bound to a free port on loopback for a local
    master, else on every interface: ``(socket, server public key, endpoint)``, the
    endpoint naming this host as the workers reach it. Clients show the run's token in
    their messages; the key reaches them only inside the job."""
    import socket as net

    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    if max_msg is not None:
        sock.setsockopt(zmq.MAXMSGSIZE, max_msg)
    pub, sec = keypair()
    sock.curve_server = True
    sock.curve_secretkey, sock.curve_publickey = sec.encode(), pub.encode()
    port = sock.bind_to_random_port(f"tcp://{'127.0.0.1' if local else '*'}")
    return sock, pub, f"tcp://{'127.0.0.1' if local else net.getfqdn()}:{port}"


def make_client(sock: zmq.Socket, public: str, secret: str, server_public: str) -> None:
    sock.curve_publickey = public.encode("ascii")
    sock.curve_secretkey = secret.encode("ascii")
    sock.curve_serverkey = server_public.encode("ascii")


class RefusalLog:
    """Refusal lines for a PE log, rate-limited: the first ``first`` refusals one by one,
    then at most one summary line per ``every`` seconds with the count (per input port)
    since the last line, and a last summary at ``close``. The first refusal of each
    ``kind`` (a short, fixed category such as "unknown CURVE key") is always written
    in full, so a flood of one kind cannot hide another. Thread-safe."""

    def __init__(self, pe: str, stream: TextIO | None = None, first: int = LOG_FIRST,
                 every: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.pe = pe
        self._stream = stream
        self.first, self.every, self._clock = first, every, clock
        self.logged = 0  # refusals logged one by one
        self._unlogged: Counter[str] = Counter()  # since the last line
        self._kinds: set[str] = set()  # kinds written in full at least once
        self._last = clock()
        self._lock = threading.Lock()

    def refused(self, domain: str, why: str, kind: str = "") -> None:
        with self._lock:
            new_kind = kind not in self._kinds
            self._kinds.add(kind)
            if self.logged < self.first or new_kind:
                self.logged += 1
                more = f" (further refusals: one line per {self.every:g} s)" if self.logged == self.first else ""
                self._write(f"spadeopt: PE {self.pe} refused a connection on input port {domain}: {why}{more}")
                return
            self._unlogged[domain] += 1
            self._summary_if_due()

    def tick(self) -> None:
        """Write the summary line if one is due (called while idle, about every 200 ms)."""
        with self._lock:
            self._summary_if_due()

    def close(self) -> None:
        with self._lock:
            self._summary()

    def _summary_if_due(self) -> None:
        if self._unlogged and self._clock() - self._last >= self.every:
            self._summary()

    def _summary(self) -> None:
        if not self._unlogged:
            return
        n = sum(self._unlogged.values())
        ports = ", ".join(f"{d} {c}" for d, c in sorted(self._unlogged.items()))
        self._write(f"spadeopt: PE {self.pe} refused {n} more connection(s) in the last "
                    f"{self._clock() - self._last:.0f} s (by input port: {ports})")
        self._unlogged.clear()

    def _write(self, line: str) -> None:
        print(line, file=self._stream or sys.stderr, flush=True)
        self._last = self._clock()


class Guard:
    """One PE's ZAP handler and handshake-failure monitor (two daemon threads).

    ``allow(domain -> {client public key (Z85) -> link id})`` installs the allow-lists;
    ``refused`` counts refusals per domain (input port ref), exactly; ``log`` writes
    them to ``stream`` (default stderr), rate-limited. ``dropped`` maps a domain to the
    first link admitted on it a second time (its connection was dropped mid-run).
    """

    def __init__(self, ctx: zmq.Context, pe: str, stream: TextIO | None = None) -> None:
        self.ctx = ctx
        self.pe = pe
        self.refused: Counter[str] = Counter()
        self.log = RefusalLog(pe, stream)
        self.dropped: dict[str, str] = {}
        self._admitted: Counter[tuple[str, str]] = Counter()
        self._zap_refused: dict[str, deque[tuple[str, str]]] = {}  # domain -> (kind, why), until its failure event comes
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
        addr = f"inproc://spadeopt-monitor-{id(sock):x}"
        sock.monitor(addr, HANDSHAKE_FAILURES)
        mon = self.ctx.socket(zmq.PAIR)
        mon.rcvhwm = 0  # every event is read: the counts stay exact under a flood
        mon.linger = 0
        mon.connect(addr)
        self._monitors.append((mon, domain))

    def start_monitor(self) -> None:
        if self._monitors:
            t = threading.Thread(target=self._serve_monitor, daemon=True, name="link-monitor")
            self._threads.append(t)
            t.start()

    def refusals(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self.refused.items()))

    def _refuse(self, domain: str, kind: str, why: str) -> None:
        with self._lock:
            self.refused[domain] += 1
        self.log.refused(domain, why, kind)

    def _zap_refuse(self, domain: str, kind: str, why: str) -> None:
        """Note why the ZAP handler refused a peer: its handshake-failure event logs it."""
        with self._lock:
            self._zap_refused.setdefault(domain, deque(maxlen=64)).append((kind, why))

    def _admit(self, domain: str, link: str, held: bool) -> None:
        """Count an admission; a second one of a link means its connection was dropped.
        Requests held for the allow-lists count once: a held handshake may time out and retry."""
        with self._lock:
            key = (domain, link)
            self._admitted[key] = 1 if held and self._admitted[key] else self._admitted[key] + 1
            if self._admitted[key] > 1:
                self.dropped.setdefault(domain, link)

    def _serve_zap(self) -> None:
        sock = self._zap
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                self.log.tick()
                if not poller.poll(200):
                    continue
                frames = sock.recv_multipart()
                version, request_id, domain, address, _identity, mechanism = frames[:6]
                dom = domain.decode(errors="replace")
                status, text, user = b"400", b"not a link of this run", b""
                if version != b"1.0":
                    status, text = b"500", b"bad ZAP version"
                elif mechanism != b"CURVE" or len(frames) < 7:
                    self._zap_refuse(dom, "wrong mechanism", f"mechanism {mechanism.decode(errors='replace')} from "
                                      f"{address.decode(errors='replace') or 'ipc peer'}")
                else:
                    held = not self._ready.is_set()
                    self._ready.wait(ALLOW_WAIT_S)
                    link = self._allowed.get(dom, {}).get(frames[6])
                    if link is not None:
                        self._admit(dom, link, held)  # before the reply: before any frame of it
                        status, text, user = b"200", b"OK", link.encode()
                    else:
                        key = z85.encode(frames[6]).decode("ascii")
                        self._zap_refuse(dom, "unknown CURVE key", f"CURVE key {key} is not an upstream link of this port "
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
                        self._refuse(by_sock[mon], *self._why(by_sock[mon], ev))
        except zmq.ContextTerminated:
            pass
        finally:
            for mon in by_sock:
                mon.close(0)

    def _why(self, domain: str, ev: dict) -> tuple[str, str]:
        """(kind, text) of a handshake failure: the ZAP handler's reason when it noted one."""
        where = ev["endpoint"].decode(errors="replace")
        if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            with self._lock:
                noted = self._zap_refused.get(domain)
                why = noted.popleft() if noted else None
            return why or ("authentication failed", f"authentication failed (ZAP status {ev['value']}) on {where}")
        return "handshake failed", f"handshake failed (no or wrong CURVE credentials), error {ev['value']} on {where}"

    def close(self) -> None:
        self._stop.set()
        self._ready.set()
        for t in self._threads:
            t.join(2.0)
        self.log.close()
