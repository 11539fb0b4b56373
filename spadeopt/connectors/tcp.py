"""A TCP line source: listen on ``host:port``; clients send newline-delimited records
(JSON objects, or CSV lines in schema order). Non-blocking: each read accepts waiting
clients and takes what their sockets hold, never waiting for more.

Rules (docs/connectors.md): only complete lines (ending in ``\\n``) are records; a
client that disconnects mid-line loses that unterminated line (counted in
``report()["partial_lines"]`` and logged to the PE log), its complete lines are kept.
Blank lines are skipped. Several clients may send at once; each client's lines keep
their order, clients interleave as they arrive. Bounded mode: ``until="disconnect"``
ends once a client has connected and every client has gone; ``count=N`` after N records.
"""

from __future__ import annotations

import selectors
import socket
import sys
from collections import deque
from typing import Any

from spadeopt.connectors.contract import ConnectorError, Source
from spadeopt.connectors.formats import decoder

RECV = 1 << 16


class _Client:
    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer = sock, peer
        self.buf = b""
        self.lines = 0


class TcpLineSource(Source):
    live = True

    def __init__(self, *, name: str, schema: list, host: str, port: int, format: str = "json",
                 until: str | None = None, count: int | None = None) -> None:
        self.name, self.host, self.port = name, host, port
        self.until, self.limit = until, count
        self.decode = decoder(format, schema)
        self.sel: selectors.DefaultSelector | None = None
        self.listener: socket.socket | None = None
        self.pending: deque[tuple[bytes, str]] = deque()  # complete lines not yet decoded, with their place
        self.clients = 0
        self.open_clients: dict[int, _Client] = {}
        self.records = 0
        self.partial = 0

    def open(self) -> None:
        if self.listener is not None:
            return
        s = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, self.port))
        except OSError as exc:
            s.close()
            raise ConnectorError(f"source '{self.name}': cannot listen on {self.host}:{self.port} ({exc.strerror}); "
                                 f"choose a free port") from None
        s.listen(64)
        s.setblocking(False)
        self.listener = s
        self.sel = selectors.DefaultSelector()
        self.sel.register(s, selectors.EVENT_READ, None)

    def _poll(self, want: int) -> None:
        """Take what is ready now (a few passes: a client accepted in one is read in the next)."""
        for _ in range(4):
            events = self.sel.select(timeout=0)
            if not events:
                return
            for key, _ in events:
                if key.data is None:
                    self._accept()
                else:
                    self._recv(key.data)
            if len(self.pending) >= want:
                return

    def _accept(self) -> None:
        while True:
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            c = _Client(conn, f"{addr[0]}:{addr[1]}")
            self.clients += 1
            self.open_clients[conn.fileno()] = c
            self.sel.register(conn, selectors.EVENT_READ, c)

    def _recv(self, c: _Client) -> None:
        try:
            data = c.sock.recv(RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # reset by the peer: as a disconnect
        if data:
            c.buf += data
            *lines, c.buf = c.buf.split(b"\n")
            for line in lines:
                c.lines += 1
                if line.strip():
                    self.pending.append((line, f"tcp {self.host}:{self.port} client {c.peer} line {c.lines}"))
            return
        if c.buf.strip():
            self.partial += 1
            print(f"source '{self.name}': client {c.peer} disconnected mid-line; its unterminated last line "
                  f"({len(c.buf)} bytes) is dropped", file=sys.stderr)
        self.sel.unregister(c.sock)
        del self.open_clients[c.sock.fileno()]
        c.sock.close()

    def read(self, n: int) -> list[tuple] | None:
        if self.listener is None:
            self.open()
        if self.limit is not None and self.records >= self.limit:
            return None
        if len(self.pending) < n:
            self._poll(n)
        want = n if self.limit is None else min(n, self.limit - self.records)
        out = []
        while self.pending and len(out) < want:
            line, where = self.pending.popleft()
            out.append(self.decode(line, lambda where=where: f"source '{self.name}': {where}"))
        self.records += len(out)
        if not out and self.until == "disconnect" and self.clients and not self.open_clients:
            return None
        return out

    def position(self) -> dict[str, Any]:
        return {"records": self.records, "clients": self.clients}

    def lag(self) -> int | None:
        return len(self.pending)

    def report(self) -> dict[str, Any]:
        return {"records": self.records, "clients": self.clients, "partial_lines": self.partial}

    def close(self) -> None:
        if self.sel is not None:
            for c in list(self.open_clients.values()):
                c.sock.close()
            self.open_clients.clear()
            self.sel.close()
            self.sel = None
        if self.listener is not None:
            self.listener.close()
            self.listener = None
