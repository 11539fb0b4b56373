"""A PE's input ports and the refusal of a frame that came on one.

``InputPort`` is one input port of a PE (its socket, upstream links, finals, wire
types); ``Pending`` counts finals per port of an operator; ``LinkError`` is a frame
that must not enter an operator, naming the PE, the port and the link. Used by the PE
runtime (``runtime.pe`` and its mixins) and the checkpoint alignment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Pending:
    """Counts finals per input port; ``arrive`` is True once, when all have arrived."""

    def __init__(self, op: str, counts: dict[str, int]) -> None:
        self.op = op
        self.left = dict(counts)
        self.total = sum(counts.values())
        self._lock = threading.Lock()

    def arrive(self, port: str | None) -> bool:
        with self._lock:
            if port is not None:
                self.left[port] -= 1
                self.total -= 1
            return self.total == 0


@dataclass
class InputPort:
    ref: str
    fn: Callable
    final: Callable
    links: int
    socket: Any = None
    finals: int = 0
    point: Any = None  # profiling builds: the PE input port's submit signal
    countdown: int = 0
    types: tuple | None = None  # wire types of the port's attributes (None: unchecked)
    pulsed: bool = False  # inside a parallel region: a batch may end with a fission pulse
    upstream: dict[str, str] = field(default_factory=dict)  # link id -> "PE pe1 (op.port)"
    finaled: set[str] = field(default_factory=set)  # links whose final has arrived
    tuples: int = 0  # live metrics: tuples taken off the port's links (a region's pulses too)


class LinkError(Exception):
    """A frame that must not enter an operator: names the PE, input port and link."""

    def __init__(self, pe: str, port: InputPort, link: str | None, problem: str) -> None:
        if link is None:
            src = "an unidentified sender (--insecure-links: links are not authenticated)"
        else:
            src = f"link {link} of {port.upstream.get(link, 'an unknown PE')}"
        super().__init__(f"malformed frame on input port '{port.ref}' of PE {pe}, from {src}: {problem}")
        self.op, self.port = port.ref.split(".", 1)
