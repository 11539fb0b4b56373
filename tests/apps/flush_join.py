"""A keyed join fed by a tumbling count window whose end-of-stream flush goes back in
event time (issue 36 item 2, decision 067): sensor readings split into two sides; the
left side is averaged every ``size`` readings per sensor (the partial groups flushed at
end of stream, in the order they were opened), the right side joined to it within
``within`` time units. All of it is region ``flush`` (width 2 under FMAN)."""

from __future__ import annotations

import random
import time

from spadeopt import App, app, count_window, time_window


def readings(n: int, sensors: int, seed: int, spin_us: int = 0):
    """``n`` readings ``(sensor, ts, v)``, times ascending with many ties; ``spin_us``
    of busy CPU before each (a run long enough to be killed mid-way)."""
    r = random.Random(seed)
    ts = 0
    for _ in range(n):
        if spin_us:
            end = time.perf_counter() + spin_us / 1e6
            while time.perf_counter() < end:
                pass
        ts += r.choice((0, 0, 1, 2))
        yield (r.randrange(sensors), ts, r.randrange(1000))


@app
def flush_join(tuples: int = 3000, sensors: int = 40, size: int = 7, within: int = 40, seed: int = 1,
               spin_us: int = 0) -> App:
    a = App("flush_join")
    s = a.source("readings", "k:int, ts:int, v:int", generator=readings,
                 args={"n": tuples, "sensors": sensors, "seed": seed, "spin_us": spin_us})
    left, right = a.split("side", s, predicates=["v % 2 == 0", "v % 3 == 0"])
    avg = a.aggregate("avg", left, window=count_window(size), by=["k"],
                      output={"k": "k", "ts": "last(ts)", "n:int": "count()", "v:int": "sum(v)"})
    j = a.join("j", avg, right, on="k", order="ts", window=(time_window("ts", within), time_window("ts", within)),
               output={"k": "left.k", "ts": "left.ts", "n": "left.n", "d:int": "left.v - right.v"})
    a.sink("matches", j, mode="file")
    a.parallel("side", "avg", "j", width=2, name="flush")
    return a


app = flush_join
