"""A keyed event-time window behind per-tuple Python work (issue 27, benchmark (b)).

``tuples`` readings ``(key:int, ts:int, value:float)`` (event time in ms, 1 ms apart, in
order; ``keys`` keys round robin) pass through ``work``, a functor calling the opaque
:func:`spin` (``work`` extra loop iterations of CPU per tuple; the default, 600, is 6-9 us of CPU
on the loaded 2-core development VM), into ``win``, a tumbling event-time window of ``window``
ms per key (mean and count), written to a file sink. ``work`` and ``win`` are declared
one parallel region ``keyed`` (hash of ``key``; FMAN runs it at ``width``, FATM chooses).
``hot`` percent of the readings go to key 0 (a skewed key: its channel gets that share
of the region's work at any width).
"""

from __future__ import annotations

from spadeopt import App, app, time_window


def readings(n: int, keys: int, hot: int = 0):
    """``(key, ts, value)``: cheap and deterministic, so the source is not the bottleneck.
    ``hot`` percent of the readings (spread evenly) are key 0's: a skewed key."""
    for i in range(n):
        yield (0 if hot and i * 37 % 100 < hot else i % keys, i, float(i * 7919 % 1000))


def spin(value: float, work: int) -> float:
    """``value``, after ``work`` loop iterations (an opaque Python call)."""
    for _ in range(work):
        pass
    return value


@app
def keyed_window(tuples: int = 300_000, keys: int = 50, work: int = 600, window: int = 10_000,
                 width: int = 2, hot: int = 0) -> App:
    a = App("keyed_window")
    src = a.source("readings", "key:int, ts:int, value:float", generator=readings,
                   args={"n": tuples, "keys": keys, **({"hot": hot} if hot else {})})
    w = a.functor("work", src, output={"key": "key", "ts": "ts", "value:float": f"spin(value, {work})"},
                  functions=[spin])
    win = a.aggregate("win", w, window=time_window("ts", window), by=["key"],
                      output={"key": "key", "start": "wstart()", "mean:float": "avg(value)", "n": "count()"})
    a.sink("out", win, mode="file")
    a.parallel("work", "win", width=width, name="keyed")
    return a


app = keyed_window
