"""A feedback loop into a tuple-generating port: FATM must never fuse it."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


class Tagger:
    def process(self, port, tup, submit):
        if port == "in":
            submit("out", tup)


@app
def loop(tuples: int = 2000) -> App:
    a = App("loop")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 20})
    t = a.custom("tag", Tagger, inputs={"in": s, "back": "echo.out"}, outputs={"out": "seq:int, payload:bytes"})
    e = a.functor("echo", t["out"], filter="seq < 0")
    a.sink("sink", t["out"], mode="count")
    del e
    return a


app = loop
