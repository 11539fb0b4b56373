"""A test app whose operator 'bad' puts one malformed frame on its real, authenticated
link to the sink's PE (test-only: it reaches its PE's sender through ``gc``; nothing in
spadeopt offers a way to do this).

``mode``: garbage (bytes that are not msgpack), arity (a 4-attribute tuple into a
2-attribute port), types (a str where the port has an int), oversize (a valid batch
larger than the run's ``max_frame``).
"""

from __future__ import annotations

import gc

import msgpack

from spadeopt import App, app
from spadeopt.toolkit.sources import counter

FRAMES = {
    "garbage": b"\xdc\xff\xff\x01garbage",
    "arity": msgpack.packb([(1, b"x", 3, 4)]),
    "types": msgpack.packb([("one", b"x")]),
    "oversize": msgpack.packb([(1, b"x" * (2 << 20))]),
}


class Corrupter:
    def __init__(self, mode: str, at: int) -> None:
        self.frame, self.at = FRAMES[mode], at

    def process(self, port: str, tup: tuple, submit) -> None:
        if tup[0] == self.at:
            for obj in gc.get_objects():
                if type(obj).__name__ == "Sender" and type(obj).__module__ == "spadeopt.runtime.transport":
                    for sock in obj.sockets:
                        sock.send(self.frame)
        submit("out", tup)


@app
def malformed(mode: str = "garbage", at: int = 100, tuples: int = 20000) -> App:
    a = App("malformed")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": tuples, "size": 20})
    out = a.custom("bad", Corrupter, inputs={"in": s}, outputs={"out": "seq:int, payload:bytes"},
                   args={"mode": mode, "at": at}, state="stateless")
    a.sink("sink", out["out"])
    return a


app = malformed
