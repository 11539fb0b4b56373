"""A chain of opaque Python calls: the data-parallel peers' favourite workload, undeclared.

``tuples`` records ``(id:int, v:float, ts:int)`` from a splittable generator (splits of
``split`` records, each seeded on its own) pass through ``n`` functors, each calling the
opaque Python function :func:`step` once per record (``work`` extra loop iterations
inside it), into a counting sink. Nothing is declared parallel and nothing is fused by
hand: FATM has to find the region (source, chain and sink are stateless, the source is
splittable, the sink counts) and choose its width and fusion for the cores it is given.
With ``sink="file"`` the answer is the records themselves, in order.
"""

from __future__ import annotations

from collections.abc import Iterator

from spadeopt import App, app
from spadeopt.toolkit.sources import splittable


@splittable("split")
def records(n: int, split: int = 4096, *, part: int = 0, parts: int = 1) -> Iterator[list]:
    """Splits ``part, part + parts, ...`` of ``n`` records ``(id, v, ts)``."""
    for s in range(part, -(-n // split), parts):
        yield [(i, float(i % 1009), 1_700_000_000_000 + i) for i in range(s * split, min(n, (s + 1) * split))]


def step(v: float, work: int) -> float:
    """``v`` moved by a little arithmetic after ``work`` loop iterations: opaque to spadeopt."""
    for _ in range(work):
        pass
    return v * 0.5 + 1.0


@app
def opaque_chain(tuples: int = 200_000, n: int = 16, work: int = 0, sink: str = "count",
                 split: int = 4096) -> App:
    a = App("opaque_chain")
    s = a.source("src", "id:int, v:float, ts:int", generator=records, args={"n": tuples, "split": split})
    for i in range(n):
        s = a.functor(f"f{i}", s, output={"id": "id", "v:float": f"step(v, {work})", "ts": "ts"},
                      functions=[step])
    a.sink("sink", s, mode=sink)
    return a


app = opaque_chain
