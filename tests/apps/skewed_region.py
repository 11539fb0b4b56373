"""A keyed parallel region whose every key hashes to channel 1 (tests only): with the
region's split, channel 0 and merge in one PE and channel 1 in another, the first PE
sends to the second and hears from it, so the two form a cycle of PEs
(tests/e2e/test_pe_cycle_no_deadlock.py)."""

from __future__ import annotations

from spadeopt import App, app, count_window


def rows(n: int):
    for i in range(n):
        yield (7, i)  # key 7 -> channel 1 of 2 (protocol.key_channel)


def work(v: int) -> int:
    x = 0
    for j in range(100):
        x += j
    return v + x


@app
def skewed_region(n: int = 400_000) -> App:
    a = App("skewed_region")
    s = a.source("src", "k:int, v:int", generator=rows, args={"n": n})
    f = a.functor("f", s, filter="v >= 0", output={"k": "k", "v:int": "work(v)"}, functions=[work])
    g = a.aggregate("g", f, window=count_window(10), by=["k"], output={"k": "k", "n": "count()", "last": "max(v)"})
    a.parallel("f", "g", width=2)
    a.sink("out", g, mode="file")
    return a


app = skewed_region
