"""Deliberately invalid apps for validation tests."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


class Echo:
    def process(self, port, tup, submit):
        if port == "in":
            submit("out", tup)


def everything_wrong() -> App:
    a = App("bad")
    s = a.source("src", "seq:int, payload:bytes", generator=counter)
    t = a.source("src2", "seq:int, other:float", generator=counter)
    a.functor("f", "src.nope")
    a.functor("f", s)  # duplicate name
    a.functor("g", s, output={"z:int": "q + 1"})  # unknown attribute
    a.union("u", [s, t])  # schema mismatch
    a.custom("c", Echo, inputs={"in": []}, outputs={"out": "seq:int"})  # unconnected
    a.sink("k", "ghost")
    return a


def colocated_loop(tuple_generating: bool) -> App:
    a = App("loop")
    s = a.source("src", "seq:int, payload:bytes", generator=counter)
    fb = a.custom("fb", Echo, inputs={"in": s, "back": "echo.out"}, outputs={"out": "seq:int, payload:bytes"},
                  tuple_generating={"back": tuple_generating})
    e = a.functor("echo", fb["out"])
    a.sink("k", e)
    a.colocate("fb", "echo")
    return a


@app
def broken() -> App:
    return everything_wrong()
