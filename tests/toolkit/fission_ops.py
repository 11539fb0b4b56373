"""Module-level user code for the fission property tests (``tests/toolkit/test_fission_graphs.py``):
keyed and stateless custom operators over the stream ``k:int, ts:int, v:int``."""

from __future__ import annotations

import threading


class Smooth:
    """Partitioned on ``k``: an exponential smoothing of ``v`` per key, emitted for 0, 1 or
    2 tuples per input (prolific and selective); at end of stream, each key's last value,
    keys in the order they first appeared (a dict filled as tuples arrive)."""

    def __init__(self, drop: int = 4) -> None:
        self.drop = drop
        self.last: dict[int, int] = {}

    def process(self, port, tup, submit):
        k, ts, v = tup
        prev = self.last.get(k)
        s = v if prev is None else (prev + v) // 2
        self.last[k] = s
        if v % self.drop:
            submit("out", (k, ts, s))
        if v % 7 == 0:
            submit("out", (k, ts, -s))

    def on_final(self, submit):
        for k, s in self.last.items():
            submit("out", (k, 10**9, s))


class Echo:
    """Stateless: every tuple, and a doubled copy of odd values; at end of stream one
    marker row."""

    def process(self, port, tup, submit):
        submit("out", tup)
        if tup[2] % 2:
            submit("out", (tup[0], tup[1], tup[2] * 2))

    def on_final(self, submit):
        submit("out", (-1, -1, 0))


class Threaded:
    """Stateless, but submits from a thread of its own (and swallows what that raises):
    refused in a parallel region all the same."""

    def process(self, port, tup, submit):
        t = threading.Thread(target=self._later, args=(tup, submit), name="user-thread")
        t.start()
        t.join()

    def _later(self, tup, submit):
        try:
            submit("out", tup)
        except RuntimeError:
            pass
