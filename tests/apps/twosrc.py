"""Two sources in one app, each burning a known CPU time per tuple (``tests/apps/burn.py``).

Under FALL both sources are in one PE and take turns in one thread
(``PERuntime.drive_sources``): each source's profile must still count only the CPU of
its own turns. ``crash_at >= 0`` makes ``b_boom`` (on source ``b``'s chain) raise on
the tuple with that ``seq``, to check the failure names the right source and operator.
Each source's sink is its own, so every fusion writes the same files.
"""

from __future__ import annotations

from spadeopt import App, app
from tests.apps.burn import burning_counter
from tests.apps.crash import explode


@app
def twosrc(tuples: int = 20_000, a_ns: int = 20_000, b_ns: int = 60_000, crash_at: int = -1) -> App:
    x = App("twosrc")
    a = x.source("a", "seq:int, payload:bytes", generator=burning_counter, args={"n": tuples, "ns": a_ns})
    b = x.source("b", "seq:int, payload:bytes", generator=burning_counter, args={"n": tuples, "ns": b_ns})
    b = x.functor("b_boom", b, output={"seq:int": f"explode(seq, {crash_at})", "payload": "payload"},
                  functions=[explode])
    x.sink("a_sink", a)
    x.sink("b_sink", b)
    return x


app = twosrc
