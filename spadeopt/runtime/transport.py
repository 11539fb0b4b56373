"""ZeroMQ links between PEs: batched msgpack over PUSH/PULL, bounded by high-water marks.

Each PE input port binds one PULL socket (ipc within a node, tcp across nodes; both
when needed); each inter-PE link is its own PUSH socket. A message is one batch of
tuples in the wire format of ``spadeopt.wire`` (msgpack, never pickle), which also
holds the final marker and ``decode_batch``, the check every frame passes where it
enters a PE. High-water marks bound every queue, so a slow consumer blocks its producer.
Links are authenticated and encrypted with CURVE unless the run is insecure (see
``spadeopt.runtime.security``).

A batch is cut into frames of about ``FRAME_BYTES`` at most: a batch whose encoding is
larger goes as two halves, each cut again if need be (in order; a fission pulse stays
last in the last one), so the tuple count per batch (``batch_size``) bounds small
tuples and the bytes bound large ones: a link queues at most its high-water mark of such
frames. Frames are bounded by ``max_frame`` at both ends: a ``Sender`` refuses to send
a single tuple larger (``FrameTooLarge``, raised in the operator that submitted it), and every PULL
socket sets ZeroMQ's ``MAXMSGSIZE`` to ``max_frame + FRAME_MARGIN``, so ZeroMQ drops a
connection that sends a larger message before allocating it (CURVE adds 33 bytes to a
frame; frames within the margin still reach ``decode_batch`` and its clear error).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any

import zmq

from spadeopt.wire import (
    DEFAULT_HWM,  # noqa: F401 (runtime.pe reads transport.DEFAULT_HWM)
    DEFAULT_MAX_FRAME,
    FRAME_BYTES,
    barrier_frame,
    final_frame,
    packer,
)

LINGER_MS = 60_000
FRAME_MARGIN = 1024  # bytes over max_frame a receiving socket still takes (CURVE's framing and more)


class FrameTooLarge(ValueError):
    """A batch whose encoding is over ``max_frame``: no receiver would take it."""


class Sender:
    """An exposed output port: encodes each submitted batch once, sends it on every link."""

    def __init__(self, port: str, locked: bool, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.port = port
        self.sockets: list[zmq.Socket] = []
        self.links: list[str] = []
        self.batches = 0
        self.tuples = 0  # live metrics: tuples and encoded bytes sent (each link carries all of them)
        self.bytes = 0
        self.blocked_s = 0.0  # backpressure: time spent waiting for a link's full queue
        self.blocked_since: float | None = None  # perf_counter() when the wait going on began
        self.max_frame = max_frame
        self._packer = packer()
        self._lock = threading.Lock() if locked else None
        self.owner: int | None = None  # an unlocked port: the thread that sends its batches
        self.sole = False  # True: one thread of the PE sends on its ports (markers from it need no owner check)
        # waits for a full link's queue instead of a blocking send (the PE's main thread
        # takes its input frames meanwhile: runtime.pe_inputs.InputLoop.wait_to_send)
        self.waiter: Callable[[zmq.Socket, Any], None] | None = None

    def __call__(self, batch) -> None:
        if self._lock is None:
            if self.owner is None:
                self.owner = threading.get_ident()
            self._send(batch)
            return
        with self._lock:  # ZeroMQ sockets and the packer are not thread-safe
            self._send(batch)

    def _send(self, batch) -> None:
        """Encode once, send on every link. A link whose queue is full (its receiver is
        slower: backpressure) is waited for, and the wait is timed: a non-blocking send
        costs what a blocking one does, so a PE that is not held back pays two additions."""
        data = self._packer.pack(batch)
        if len(data) > FRAME_BYTES and len(batch) > 1:  # rare: large tuples
            half = len(batch) // 2
            self._send(batch[:half])
            self._send(batch[half:])
            return
        if len(data) > self.max_frame:
            self._too_large(batch, data)
        for s in self.sockets:
            try:
                s.send(data, zmq.NOBLOCK)
            except zmq.Again:
                self.blocked_since = t0 = perf_counter()  # a wait still going on counts too (pe_live)
                self._wait_send(s, data)
                self.blocked_since = None
                self.blocked_s += perf_counter() - t0
        self.batches += 1
        self.tuples += len(batch)
        self.bytes += len(data)

    def _too_large(self, batch, data: bytes) -> None:
        raise FrameTooLarge(f"a tuple for output port {self.port} encodes to {len(data):,} bytes, over "
                            f"max_frame ({self.max_frame:,} bytes): make the tuples smaller or raise max_frame "
                            f"in the build's deploy.json")

    def final(self) -> None:
        self._control(final_frame)

    def barrier(self, checkpoint: int) -> None:
        """Checkpoint ``checkpoint``'s barrier on every link, after every batch sent before it."""
        self._control(lambda link: barrier_frame(link, checkpoint))

    def marker(self, frame: bytes) -> None:
        """A latency marker (``runtime.latency``) on every link, behind the batches sent so
        far, when the calling thread may send on this port: always under the lock of a
        port threads share, else only from the thread that sends its batches (ZeroMQ
        sockets are not thread-safe): the PE's one thread (``sole``) or the one that sent
        its first batch; until then, in a PE of two threads, the port is skipped."""
        if self._lock is None and not (self.sole or self.owner == threading.get_ident()):
            return
        self._control(lambda _link: frame)

    def _control(self, frame) -> None:
        """A control frame on every link, under the batches' lock when threads share this
        port (a barrier sent between a batch's two sockets would split the checkpoint)."""
        with self._lock or contextlib.nullcontext():
            for s, link in zip(self.sockets, self.links, strict=True):
                data = frame(link)
                try:
                    s.send(data, zmq.NOBLOCK)
                except zmq.Again:
                    self._wait_send(s, data)

    def _wait_send(self, s: zmq.Socket, data) -> None:
        """``data`` on ``s``, whose queue is full: through the PE's ``waiter`` (which keeps
        taking this PE's input frames while it waits) or a blocking send."""
        if self.waiter is None:
            s.send(data)
        else:
            self.waiter(s, data)


def push_socket(ctx: zmq.Context, hwm: int) -> zmq.Socket:
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, hwm)
    s.setsockopt(zmq.LINGER, LINGER_MS)
    return s


def pull_socket(ctx: zmq.Context, hwm: int, max_frame: int = DEFAULT_MAX_FRAME) -> zmq.Socket:
    """A receiving socket: ZeroMQ drops a connection whose message is over ``max_frame``
    (plus ``FRAME_MARGIN``) before allocating it."""
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, hwm)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.MAXMSGSIZE, max_frame + FRAME_MARGIN)
    return s
