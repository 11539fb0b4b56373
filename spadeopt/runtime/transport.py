"""ZeroMQ links between PEs: batched msgpack over PUSH/PULL, bounded by high-water marks.

Each PE input port binds one PULL socket (ipc within a node, tcp across nodes; both
when needed); each inter-PE link is its own PUSH socket. A message is one batch of
tuples encoded with msgpack (never pickle); an empty message is the final marker.
High-water marks bound every queue, so a slow consumer blocks its producer.
"""

from __future__ import annotations

import threading

import msgpack
import zmq

FINAL = b""
DEFAULT_HWM = 32
LINGER_MS = 60_000


def decode(data: bytes):
    return msgpack.unpackb(data, use_list=False, raw=False)


class Sender:
    """An exposed output port: encodes each submitted batch once, sends it on every link."""

    def __init__(self, port: str, locked: bool) -> None:
        self.port = port
        self.sockets: list[zmq.Socket] = []
        self.batches = 0
        self._packer = msgpack.Packer()
        self._lock = threading.Lock() if locked else None

    def __call__(self, batch) -> None:
        if self._lock is None:
            data = self._packer.pack(batch)
            for s in self.sockets:
                s.send(data)
            return
        with self._lock:  # ZeroMQ sockets and the packer are not thread-safe
            data = self._packer.pack(batch)
            for s in self.sockets:
                s.send(data)

    def final(self) -> None:
        for s in self.sockets:
            s.send(FINAL)


def push_socket(ctx: zmq.Context, endpoint: str, hwm: int) -> zmq.Socket:
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, hwm)
    s.setsockopt(zmq.LINGER, LINGER_MS)
    s.connect(endpoint)
    return s


def pull_socket(ctx: zmq.Context, hwm: int) -> zmq.Socket:
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, hwm)
    s.setsockopt(zmq.LINGER, 0)
    return s
