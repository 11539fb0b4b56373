"""A source whose output port has two in-PE subscribers (paper 003 Fig. 3)."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


@app
def fanout(tuples: int = 30000) -> App:
    a = App("fanout")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 40})
    x = a.functor("a", s, filter="seq % 2 == 0")
    y = a.functor("b", s, output={"seq": "seq"})
    m = a.merge("m", [x, a.functor("b2", y, output={"seq": "seq", "payload": "b''"})], order_by="seq")
    a.sink("sink", m, mode="count")
    a.colocate("a", "b")
    return a


app = fanout
