"""Latency markers: how long the stream takes from its sources to its sinks, in a running app.

Measured as Flink's latency markers measure it. About every ``MARK_EVERY`` seconds each
source of a PE, right after a batch has gone through the operators fused with it (the
sources thread runs a batch to its end before it reads the next), sends a marker on
the PE's output links: ``(origin, seq, t0)``, ``origin`` the source's name and ``t0``
the wall time the batch's oldest record came in — for an unbounded broker source the
entry's ID time (the broker's clock, so time spent waiting in the stream counts), for
every other source the moment the PE read it (``Source.arrived``). A marker follows
the batches sent before it on a link; a PE that takes one off a link has processed
every frame before it, and passes it on, once per ``(origin, seq)`` (the first copy to
arrive: a marker from a split reaches a merge through every channel), on each output
link from the thread that sends that link's batches (``transport.Sender.marker``). A
PE with sinks records ``now - t0`` for every marker it takes, its own sources' included.

So a sample is the time a position of the stream took from the moment its records came
in to the moment the sinks had everything before it: the source's batching, links,
queues and every operator's processing. Not counted, as in Flink: the time a row waits
inside a window for the window to close, or rows an ordered merge holds for another
channel; and on several hosts, the clocks' offset (same host: none).

Cost: one marker per source per ``MARK_EVERY`` (10 a second), a ``time.time()`` per
bounded source batch, and a thread-id check per batch a port sends.
"""

from __future__ import annotations

import random
import threading
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

MARK_EVERY = 0.1  # s between two markers of one source
CAP = 20_000  # samples a PE keeps (a reservoir beyond: about 30 min of markers from one source)
BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000)  # live histogram bounds
MAX_ORIGINS = 4096  # origins a PE follows; markers of further ones are dropped (a bound on memory)


class Latency:
    """One PE's markers: the sequence numbers it sends and takes, the samples it records."""

    def __init__(self) -> None:
        self.samples: list[float] = []  # ms
        self.recorded = 0
        self.buckets = [0] * (len(BUCKETS_MS) + 1)  # samples per bucket (the last: over every bound)
        self.sum_ms = 0.0
        self._sent: dict[str, int] = {}  # own origin -> last seq sent
        self._taken: dict[str, int] = {}  # origin -> last seq taken off a link
        self._rng = random.Random(0)
        self._lock = threading.Lock()  # the sources thread and the main thread both record

    def next_seq(self, origin: str) -> int:
        """The sequence number of ``origin``'s next marker (sources thread)."""
        seq = self._sent[origin] = self._sent.get(origin, 0) + 1
        return seq

    def take(self, origin: str, seq: int) -> bool:
        """A marker off a link: True when it is the first copy of a newer marker of
        ``origin`` (record it, pass it on), False for a copy or an older one."""
        last = self._taken.get(origin)
        if last is None and len(self._taken) >= MAX_ORIGINS:
            return False
        if last is not None and seq <= last:
            return False
        self._taken[origin] = seq
        return True

    def record(self, ms: float) -> None:
        """One sample, kept in a reservoir of ``CAP`` (Algorithm R)."""
        with self._lock:
            self.recorded += 1
            self.buckets[bisect_left(BUCKETS_MS, ms)] += 1
            self.sum_ms += ms
            if len(self.samples) < CAP:
                self.samples.append(round(ms, 3))
                return
            j = self._rng.randrange(self.recorded)
            if j < CAP:
                self.samples[j] = round(ms, 3)


def summary(samples: Iterable[float]) -> dict[str, Any] | None:
    """p50 / p90 / p99 / max (ms) and the number of samples; None without samples."""
    xs = sorted(samples)
    if not xs:
        return None

    def q(p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    return {"p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99), "max_ms": xs[-1], "markers": len(xs)}
