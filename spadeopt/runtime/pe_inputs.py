"""A PE's main loop: frames off its input ports, checked, handed to its operators.

``InputLoop`` is a mixin of ``runtime.pe.PERuntime``: ``_main_loop`` takes frames until
every port has all its finals; ``_take`` sorts a frame (a checkpoint's, a final, a
latency marker, a batch checked by ``wire.decode_batch``); ``_final`` counts finals once
per upstream link.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from time import perf_counter

import zmq

from spadeopt import wire
from spadeopt.runtime.pe_ports import InputPort, LinkError

WAIT_MS = 100  # ms the main thread waits for a frame before it looks at stop, checkpoints, dropped links


class InputLoop:
    """The main loop of a ``PERuntime`` (see the module doc)."""

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

    def _one_port_loop(self, port: InputPort) -> None:
        """``_main_loop`` for a PE with one input port: a blocking ``recv`` per frame."""
        sock = port.socket
        sock.setsockopt(zmq.RCVTIMEO, WAIT_MS)
        take, guard, ck = self._take, self.guard, self.checkpoints
        while not self.stop:
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
