"""A stream so rare that stride sampling at s = 0.01 almost never samples it (refine must
still keep it as a link, with its exact rate from the port totals)."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


@app
def rare(tuples: int = 20_000) -> App:
    a = App("rare")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 16, "seed": 1})
    r = a.functor("rare", s, filter="seq % 2000 == 0")  # 10 tuples of 20,000
    a.sink("sink", r)
    return a
