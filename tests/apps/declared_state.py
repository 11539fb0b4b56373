"""A custom operator whose declared state kind is ``state``: ``honest`` numbers each
key's tuples (``state="partitioned", key=["k"]``, as it is), ``liar`` declares the same
operator ``state="stateless"``, so at width > 1 each channel numbers only the tuples it
was dealt and the answers change. For ``spadeopt run --verify-fission``."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


class Numberer:
    """Each key's running count of the tuples seen so far."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}

    def process(self, port: str, tup: tuple, submit) -> None:
        k = tup[0] % 4
        self.seen[k] = self.seen.get(k, 0) + 1
        submit("out", (tup[0], k, self.seen[k]))


@app
def declared_state(state: str = "honest", tuples: int = 2000, width: int = 2) -> App:
    a = App("declared_state")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 8})
    keyed = a.functor("keyed", s, output={"seq": "seq", "k:int": "seq % 4"})
    kind = {"state": "stateless"} if state == "liar" else {"state": "partitioned", "key": ["k"]}
    out = a.custom("number", Numberer, inputs={"in": keyed}, outputs={"out": "seq:int, k:int, n:int"}, **kind)
    a.sink("sink", out["out"])
    a.parallel("number", width=width, name="reg")
    return a


app = declared_state
