"""A PE's main loop: frames off its input ports, checked, handed to its operators.

``InputLoop`` is a mixin of ``runtime.pe.PERuntime``: ``_main_loop`` takes frames until
every port has all its finals; ``_take`` sorts a frame (a checkpoint's, a final, a
latency marker, a batch checked by ``wire.decode_batch``); ``_final`` counts finals once
per upstream link.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from time import perf_counter

import zmq

from spadeopt import wire
from spadeopt.runtime.pe_ports import InputPort, LinkError

WAIT_MS = 100  # ms the main thread waits for a frame before it looks at stop, checkpoints, dropped links
BACKLOG_FRAMES = 256
"""Frames per input port the main thread takes off its socket while it waits to send on a
full link (:meth:`InputLoop.wait_to_send`). A PE that sends to another and hears from it
(a split and its merge in one PE, a channel in another; only one thread reads and sends)
would otherwise block on the other's full queue while the other blocks on its own: a
deadlock, seen with every key in one channel (``tests/e2e/test_pe_cycle_no_deadlock.py``).
What the other sends back while we wait is bounded by what it holds from us (its queue of
``hwm`` frames, a frame or two out per frame in), far below this; beyond it a port is
left to backpressure, as before."""


class InputLoop:
    """The main loop of a ``PERuntime`` (see the module doc)."""

    _backlog: dict[str, tuple[InputPort, deque]] | None = None  # frames taken while waiting to send, per port
    _main_thread: int | None = None  # the thread running _main_loop (the one that reads the inputs)

    def wait_to_send(self, sock: zmq.Socket, data) -> None:
        """Send ``data`` on ``sock``, whose queue is full. From the main thread: while
        waiting, take frames off the input ports a cycle of PEs closes through
        (``cyclic_inputs``, ``Deployment.cyclic_inputs``) into per-port backlogs (up to
        :data:`BACKLOG_FRAMES` each), which the main loop hands on first, in arrival
        order; the other inputs are left to backpressure (taking them too only queued more
        work that sends into the full link). From any other thread (a sources thread: the
        main thread reads meanwhile), a blocking send."""
        if threading.get_ident() != self._main_thread:
            sock.send(data)
            return
        if self._backlog is None:
            self._backlog = {}
        backlog = self._backlog
        while True:
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLOUT)
            for ref in self.cyclic_inputs:
                port = self.inputs.get(ref)
                if port is not None and port.finals < port.links \
                        and len(backlog.get(ref, (None, ()))[1]) < BACKLOG_FRAMES:
                    poller.register(port.socket, zmq.POLLIN)
            ready = dict(poller.poll(WAIT_MS))
            if ready.get(sock, 0) & zmq.POLLOUT:
                try:
                    sock.send(data, zmq.NOBLOCK)
                    return
                except zmq.Again:
                    pass
            for ref in self.cyclic_inputs:
                port = self.inputs.get(ref)
                if port is not None and ready.get(port.socket, 0) & zmq.POLLIN:
                    q = backlog.setdefault(ref, (port, deque()))[1]
                    while len(q) < BACKLOG_FRAMES:
                        try:
                            q.append(port.socket.recv(zmq.NOBLOCK, copy=False))
                        except zmq.Again:
                            break
            if self.stop:
                sock.send(data)  # failing: the guard ends the PE; as a blocking send did
                return

    def _take_backlog(self) -> list[InputPort]:
        """Hand on the frames :meth:`wait_to_send` took, port by port in arrival order
        (more may be taken meanwhile); the ports whose last final was among them."""
        finished = []
        backlog = self._backlog
        while backlog:
            ref, (port, q) = next(iter(backlog.items()))
            while q:
                if self._take(port, q.popleft()):
                    finished.append(port)
            if not q:
                backlog.pop(ref, None)
        return finished

    def _main_loop(self) -> None:
        """Take frames off the input ports until every port has all its finals.

        A PE with one input port (most of them) blocks in ``recv`` (``WAIT_MS`` at a
        time, then looks at ``stop``, checkpoints and dropped links again); with several
        a poller waits for any of them and drains up to 64 frames of a ready port. A
        poll and the failed non-blocking ``recv`` that ends a drain cost 7-10 us a frame
        where the sender is the slower end and every frame is waited for
        (docs/decisions/007-inter-pe-link-cost.md)."""
        ports = list(self.inputs.values())
        if len(ports) == 1:
            self._one_port_loop(ports[0])
            return
        poller = zmq.Poller()
        by_socket = {}
        for port in ports:
            poller.register(port.socket, zmq.POLLIN)
            by_socket[port.socket] = port
        open_ports = len(by_socket)
        take, guard, ck = self._take, self.guard, self.checkpoints
        while open_ports and not self.stop:
            if self._backlog:  # frames taken while this thread waited to send: first
                for port in self._take_backlog():
                    poller.unregister(port.socket)
                    open_ports -= 1
                continue
            if ck is not None and ck.release_due:  # an alignment the sources thread completed
                ck.release()
            if guard is not None and guard.dropped:  # promptly, for the ports still open
                self._check_dropped(p for p in by_socket.values() if p.finals < p.links)
            t0 = perf_counter()
            ready = poller.poll(WAIT_MS)
            self.idle_s += perf_counter() - t0  # waiting for input (live metrics)
            for sock, _ in ready:
                port = by_socket[sock]
                for _ in range(64):
                    try:
                        frame = sock.recv(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    if take(port, frame):
                        poller.unregister(sock)
                        open_ports -= 1
                        break
                    if self._backlog:  # it waited to send and took later frames: those first
                        break
                if self._backlog:  # (of this port or another ready one)
                    break

    def _one_port_loop(self, port: InputPort) -> None:
        """``_main_loop`` for a PE with one input port: a blocking ``recv`` per frame."""
        sock = port.socket
        sock.setsockopt(zmq.RCVTIMEO, WAIT_MS)
        take, guard, ck = self._take, self.guard, self.checkpoints
        while not self.stop:
            if self._backlog and self._take_backlog():  # frames taken while this thread waited to send
                return
            if ck is not None and ck.release_due:  # an alignment the sources thread completed
                ck.release()
            if guard is not None and guard.dropped:
                self._check_dropped([port])
            t0 = perf_counter()
            try:
                frame = sock.recv(copy=False)
            except zmq.Again:  # WAIT_MS without a frame
                self.idle_s += perf_counter() - t0
                continue
            self.idle_s += perf_counter() - t0  # waiting for input (live metrics)
            if take(port, frame):
                return

    def _take(self, port: InputPort, frame: zmq.Frame) -> bool:
        """One frame off ``port``'s socket: a checkpoint's, a final marker (True when it
        was the port's last) or a batch, checked (``wire.decode_batch``) and handed to
        the port's operator."""
        self.received += 1
        data = frame.buffer
        ck = self.checkpoints
        if ck is not None and ck.intercept(port, frame, data):  # barriers, blocked links
            return False
        tag = data[:1]
        if tag == wire.FINAL_TAG:
            return self._final(port, frame, self.secure)
        if tag == wire.MARKER_TAG:
            self.take_marker(port, frame, data)
            return False
        try:
            batch = wire.decode_batch(data, port.types, self.max_frame, port.pulsed)
        except wire.WireError as exc:
            raise LinkError(self.pe_id, port, frame.get("User-Id") if self.secure else None, str(exc)) from None
        port.tuples += len(batch)
        if port.point is None:
            port.fn(batch)
        else:
            self._sampled_dispatch(port, batch)
        return False

    def _final(self, port: InputPort, frame: zmq.Frame, secure: bool) -> bool:
        """Count a final marker once per upstream link; True when the port is final."""
        claimed = bytes(frame.buffer[1:]).decode(errors="replace")
        link = frame.get("User-Id") if secure else claimed
        if claimed != link:
            raise LinkError(self.pe_id, port, link, f"final marker names link {claimed!r}")
        if port.upstream and link not in port.upstream:
            raise LinkError(self.pe_id, port, None, f"final marker of {link!r}, not an upstream link of this port")
        if link in port.finaled:
            print(f"spadeopt: PE {self.pe_id} ignored a second final marker on link {link} into "
                  f"{port.ref}", file=sys.stderr, flush=True)
            return False
        port.finaled.add(link)
        port.finals += 1
        if port.finals == port.links and self.guard is not None and self.guard.dropped:
            self._check_dropped([port])  # its admission came before any frame it then sent
        if port.point is not None and port.finals == port.links:
            port.point.close(port.countdown)
        port.final(port.ref.split(".", 1)[1])
        return port.finals == port.links

    def _check_dropped(self, ports: Iterable[InputPort]) -> None:
        """Stop with a ``LinkError`` if a link into one of ``ports`` was dropped."""
        for port in ports:
            link = self.guard.dropped.get(port.ref)
            if link is not None:
                raise LinkError(self.pe_id, port, link, (
                    f"oversized frame: ZeroMQ dropped the link's connection and the link reconnected; "
                    f"it drops a connection that sends a frame over max_frame ({self.max_frame:,} bytes) "
                    f"before reading it, so frames sent on it may be lost"))

    @staticmethod
    def _sampled_dispatch(port: InputPort, batch) -> None:
        """A PE input port's submit signal: time the process call when a sample is due."""
        cd = port.countdown - len(batch)
        if cd > 0:
            port.countdown = cd
            port.fn(batch)
            return
        t0 = time.thread_time_ns()
        port.fn(batch)
        port.countdown = port.point.sample_process(cd, batch, time.thread_time_ns() - t0)
