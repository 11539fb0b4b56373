"""A fast PE feeding a slow one: its stream must arrive whole even if it finishes first.

Regression app for lost stream tails (libzmq drops a full PULL queue when the PUSH
peer disconnects early; zeromq/libzmq#4660). Found by the bargain/outlier work.
"""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


def spin(seq: int, work: int) -> int:
    for _ in range(work):
        pass
    return seq


@app
def loss(tuples: int = 20000, work: int = 20000, ways: int = 32) -> App:
    a = App("loss")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 20})
    outs = a.split("split", s, n=ways, by="seq")
    slow = a.functor("slow", outs[0], output={"seq:int": f"spin(seq, {work})"}, functions=[spin])
    a.sink("sink", slow, mode="count")
    a.colocate("src", "split")
    return a


app = loss
