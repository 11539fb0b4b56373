"""A test app whose operator 'boom' raises on the tuple with seq == at."""

from __future__ import annotations

from spadeopt import App, app
from spadeopt.toolkit.sources import counter


def explode(seq: int, at: int) -> int:
    if seq == at:
        raise ValueError(f"bad tuple {seq}")
    return seq


@app
def crash(at: int = 5000, tuples: int = 20000) -> App:
    a = App("crash")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 20})
    s = a.functor("fwd", s)
    s = a.functor("boom", s, output={"seq:int": f"explode(seq, {at})", "payload": "payload"}, functions=[explode])
    a.sink("sink", s)
    return a


app = crash
