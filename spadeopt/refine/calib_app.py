"""The calibration micro-app: a paced source -> ``forwarders`` forwarders -> a counting sink.

``spadeopt calibrate`` builds it with NONE fusion (one PE per operator, every link at the
same rate) and runs it with the real node agent, once per grid point (rate, tuple size).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgpack

from spadeopt import App, app

_CHUNK = 512
"""Tuples between two pacing checks (one source batch: the source sleeps when it is ahead
of schedule, at most once per batch it sends)."""


def role(op: str) -> str:
    """What the operator's PE does on the links: send, forward (receive and send), receive."""
    return {"src": "send", "sink": "receive"}.get(op, "forward")


def payload_for(size: int) -> bytes:
    """A payload so that a tuple ``(seq, payload)`` encodes to about ``size`` bytes (msgpack).

    The sequence number is taken as a 4-byte integer (the typical case in a run).
    """
    overhead = len(msgpack.packb((100_000, b""), use_bin_type=True))
    n = max(0, size - overhead)
    if n > 255:  # bin 16/32 headers are one/three bytes longer than bin 8
        n -= 1 if n - 1 <= 0xFFFF else 3
    return bytes(i % 251 for i in range(n))


def paced(rate: float, size: int, seconds: float) -> Iterator[tuple]:
    """``(seq, payload)`` tuples at ``rate`` per second (at most) for ``seconds``.

    Stops after ``rate * seconds`` tuples or ``seconds`` of wall time, whichever comes
    first (a rate the link cannot carry ends on time too).
    """
    payload = payload_for(size)
    n = int(rate * seconds)
    t0 = time.monotonic()
    i = 0
    while i < n:
        for _ in range(min(_CHUNK, n - i)):
            yield (i, payload)
            i += 1
        if i >= n:
            return
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif -delay > seconds - i / rate:  # behind schedule and out of time
            return


@app
def calibration(rate: float = 10_000.0, size: int = 100, seconds: float = 1.0, forwarders: int = 3) -> App:
    a = App("calibration")
    s = a.source("src", "seq:int, payload:bytes", generator=paced,
                 args={"rate": rate, "size": size, "seconds": seconds})
    for i in range(forwarders):
        s = a.functor(f"fwd{i}", s)
    a.sink("sink", s, mode="count")
    return a


app = calibration
