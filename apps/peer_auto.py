"""The peer workload with no annotation at all: FATM has to find the parallel region itself.

``tuples`` records ``(id:int, price:float, symbol:str, volume:float, ts:int)`` from
peer's splittable source (:func:`records`, as ``apps.peer.records``: seeded per split
of ``split`` records) pass through ``n`` functors that each call the opaque Python function
:func:`value_of` (``work`` extra loop iterations of CPU each), into a counting sink (or
a file sink with ``sink="file"``). Unlike ``apps/peer.py`` it declares no
``parallel`` region and no ``fuse`` group: ``spadeopt optimize`` discovers the region
(source, functors and a counting sink; ``spadeopt.plan.discover``) and chooses its
width; FMAN is then one PE per operator, like NONE.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from spadeopt import App, app
from spadeopt.toolkit.sources import splittable

SCHEMA = "id:int, price:float, symbol:str, volume:float, ts:int"
TS0 = 1_700_000_000_000


@splittable("split")
def records(n: int, symbols: int = 100, seed: int = 1, split: int = 4096, *, part: int = 0,
            parts: int = 1) -> Iterator[list]:
    """``apps.peer.records``, here so the app is one file: splits ``part, part + parts, ...``
    of ``n`` seeded records, ``split`` records each, every split seeded on its own."""
    syms = [f"S{i:03d}" for i in range(symbols)]
    for s in range(part, -(-n // split), parts):
        rand = random.Random(seed * 1_000_003 + s).random
        yield [(i, round(10.0 + 90.0 * rand(), 2), syms[int(rand() * symbols)], round(1.0 + 999.0 * rand(), 1),
                TS0 + i + 1) for i in range(s * split, min(n, (s + 1) * split))]


def value_of(price: float, volume: float, work: int) -> float:
    """``price * volume``, after ``work`` loop iterations (an opaque Python call)."""
    for _ in range(work):
        pass
    return price * volume


@app
def peer_auto(tuples: int = 1_000_000, n: int = 16, work: int = 0, symbols: int = 100, sink: str = "count",
              split: int = 4096) -> App:
    a = App("peer_auto")
    s = a.source("src", SCHEMA, generator=records, args={"n": tuples, "symbols": symbols, "seed": 1, "split": split})
    for i in range(n):
        s = a.functor(f"f{i}", s, output={"id": "id", "price": "price", "symbol": "symbol", "volume": "volume",
                                          "ts": "ts", "notional:float": f"value_of(price, volume, {work})"},
                      functions=[value_of])
    a.sink("sink", s, mode=sink)
    return a


app = peer_auto
