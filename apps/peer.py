"""The common peer workload: records through a chain of functors, counting sink.

``tuples`` records ``(id:int, price:float, symbol:str, volume:float, ts:int)`` (seeded)
pass through ``n`` functors that each (re)compute ``notional = price * volume``, into a
counting sink (or a file sink with ``sink="file"``). The whole chain is declared as one
parallel region ``chain`` of ``width`` channels (stateless and static-rate: the split
deals blocks round robin, the merge takes them back in turn). FMAN: source (and split)
in one PE, each channel one PE, merge and sink in one PE; at width 1 the functors are
one PE.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from spadeopt import App, app

SCHEMA = "id:int, price:float, symbol:str, volume:float, ts:int"


def records(n: int, symbols: int = 100, seed: int = 1) -> Iterator[tuple]:
    """``n`` seeded records ``(id, price, symbol, volume, ts)``."""
    rng = random.Random(seed)
    syms = [f"S{i:03d}" for i in range(symbols)]
    rand, ts = rng.random, 1_700_000_000_000
    for i in range(n):
        ts += 1
        yield (i, round(10.0 + 90.0 * rand(), 2), syms[int(rand() * symbols)], round(1.0 + 999.0 * rand(), 1), ts)


@app
def peer(tuples: int = 1_000_000, n: int = 16, width: int = 1, symbols: int = 100, sink: str = "count") -> App:
    a = App("peer")
    s = a.source("src", SCHEMA, generator=records, args={"n": tuples, "symbols": symbols, "seed": 1})
    ops = []
    for i in range(n):
        s = a.functor(f"f{i}", s, output={"id": "id", "price": "price", "symbol": "symbol", "volume": "volume",
                                          "ts": "ts", "notional:float": "price * volume"})
        ops.append(f"f{i}")
    a.sink("sink", s, mode=sink)
    a.parallel(*ops, width=width, name="chain")
    if len(ops) > 1:
        a.fuse(*ops)
    return a


app = peer
