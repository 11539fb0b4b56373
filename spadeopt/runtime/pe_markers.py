"""Latency markers in a PE: made after a source's batch, taken off a link, passed on once.

``LatencyMarkers`` is a mixin of ``runtime.pe.PERuntime``; the frames are
``wire.marker_frame`` / ``wire.parse_marker``, the bookkeeping ``runtime.latency``.
"""

from __future__ import annotations

import time

import zmq

from spadeopt import wire
from spadeopt.runtime.pe_ports import InputPort, LinkError


class LatencyMarkers:
    """Markers of a ``PERuntime`` (see the module doc)."""

    def _mark(self, origin: str, came_in: float, now: float) -> None:
        """A latency marker of source ``origin`` whose batch came in at ``came_in`` and has
        just gone through this PE's operators (sources thread; ``runtime.latency``)."""
        self._pass_marker(wire.marker_frame(origin, self.latency.next_seq(origin), came_in), came_in, now)

    def take_marker(self, port: InputPort, frame: zmq.Frame, data) -> None:
        """A latency marker off ``port``: every frame before it on its link has been
        processed; recorded when this PE has sinks, passed on once (``runtime.latency``)."""
        try:
            origin, seq, came_in = wire.parse_marker(data)
        except wire.WireError as exc:
            raise LinkError(self.pe_id, port, frame.get("User-Id") if self.secure else None, str(exc)) from None
        if self.latency.take(origin, seq):
            self._pass_marker(bytes(data), came_in, time.time())

    def _pass_marker(self, frame: bytes, came_in: float, now: float) -> None:
        """Record a marker's latency when this PE has sinks, and send it on every port."""
        if self.sinks:
            self.latency.record((now - came_in) * 1000.0)
        for s in self.senders.values():
            s.marker(frame)
